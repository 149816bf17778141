"""Image rewards."""
