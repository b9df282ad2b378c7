"""`audit`: classify every registered architecture against the EAGLE3 contract, statically (AST, no GPU)."""
