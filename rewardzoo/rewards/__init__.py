"""Reward implementations, one family per file, grouped by modality; the contract is in ``base``."""
