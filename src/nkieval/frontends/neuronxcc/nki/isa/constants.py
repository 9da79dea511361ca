"""``neuronxcc.nki.isa.constants``: the ISA enums."""

from nkieval.sim.isa.enums import dge_mode, dma_engine, engine, nc_version, oob_mode, reduce_cmd

__all__ = ["dge_mode", "dma_engine", "engine", "nc_version", "oob_mode", "reduce_cmd"]
