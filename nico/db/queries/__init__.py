"""Read queries that several services share or that belong to no single model."""
