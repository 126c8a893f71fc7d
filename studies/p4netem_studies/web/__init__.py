"""Web endpoints, page generation and page loaders for the p4netem labs."""
