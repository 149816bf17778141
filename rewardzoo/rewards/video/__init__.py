"""Video rewards. Imports as every reward does (see :mod:`rewardzoo.rewards`)."""
