"""What users write and hand over, as value types with strict parsing.

- ``sample`` — :class:`~rewardzoo.spec.sample.Sample`, one sample (a manifest line's fields);
- ``config`` — :class:`RewardSpec`, :class:`RewardConfig`, :class:`EnvironmentSpec`, their parsing and schema;
- ``models`` — the config declared once as pydantic models: its keys, defaults, constraints, errors and schema;
- ``monitor`` — the ``monitor:`` section; ``placement`` — an entry's ``ray:`` block.

May import only :mod:`rewardzoo.errors`, :mod:`rewardzoo.shared` and pydantic (in ``models``, imported when a config
is parsed). Resolving names against the registry is :mod:`rewardzoo.core.resolve`.
"""
