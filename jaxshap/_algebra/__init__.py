"""The Gaussian conditioning algebra shared by the Gaussian masker and LinearExplainer."""
