"""Several engines (replicas) sharing one Redis behave as one bot."""
