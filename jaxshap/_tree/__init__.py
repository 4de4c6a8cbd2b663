"""TreeSHAP for tree ensembles (private subpackage)."""
