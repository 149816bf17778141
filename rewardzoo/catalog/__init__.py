"""The reward catalog: the model cards (each reward's record), their index, the extras they need.

- ``resources`` — package data: the model cards and the shipped configs;
- ``registry`` — the index of cards, the lazy import of an implementation by its card's ``module:Class``;
- ``extras`` — what each optional extra requires, read from the package's requirements.

May import the rewards (by a card's string only), the contract, :mod:`rewardzoo.shared` and
:mod:`rewardzoo.errors`.
"""
