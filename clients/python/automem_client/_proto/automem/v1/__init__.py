"""Generated from protos/ by `make protos` (automem/protogen.py); never edited by hand."""
