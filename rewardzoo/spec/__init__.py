"""What users write and hand over, as value types with strict parsing.

- ``sample`` — :class:`~rewardzoo.spec.sample.Sample`, one sample (a manifest line's fields);
- ``config`` — :class:`RewardSpec`, :class:`RewardConfig`, :class:`EnvironmentSpec`, their parsing and schema;
- ``monitor`` — the ``monitor:`` section.

May import only :mod:`rewardzoo.errors` and :mod:`rewardzoo.shared`. Resolving names against the registry is
:mod:`rewardzoo.core.resolve`.
"""
