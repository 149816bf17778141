"""Text rewards."""
