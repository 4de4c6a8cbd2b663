"""The runtime every explainer shares: model adapters, input checks, chunking, sharding, streaming, progress."""
