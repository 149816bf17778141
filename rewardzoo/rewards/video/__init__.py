"""Video rewards."""
