"""Page loaders: fetch a generated page by its manifest over one protocol and report JSON."""
