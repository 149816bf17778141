"""Audio rewards."""
