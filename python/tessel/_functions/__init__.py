"""The namespace's functions written in Python, one module per category, as NumPy and CuPy lay
them out. Each public function is defined once, in the module of its category; ``tessel``'s
``__init__`` imports it by name. The C++ functions (elementwise functions, reductions, creation,
indexing) are the ``_tessel`` extension's; a Python function here either composes them or gives
one the Array API's or NumPy's signature.
"""
