"""Group rewards."""
