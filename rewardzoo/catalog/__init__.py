"""The reward catalog: the model cards (each reward's record) and the extras they need.

- ``resources`` — package data: the model cards and the shipped configs;
- ``extras`` — what each optional extra requires, read from the package's requirements;
- ``options`` — each reward's typed options (package data generated from its ``Options``): the card's table.

The index of cards (the lazy import of an implementation by its card's ``module:Class``) is
:mod:`rewardzoo.registry`, at the package root, in this layer.

May import the rewards (by a card's string only), the contract, :mod:`rewardzoo.spec`, :mod:`rewardzoo.shared`
and :mod:`rewardzoo.errors`.
"""
