"""``neuronxcc``: only the ``neuronxcc.nki`` (Beta-1 NKI) part of the Neuron compiler package, simulated.

Served by the import shim (``nkieval.frontends.install()``); the compiler itself is not here.
"""

__version__ = "2.26.0+nkieval"
