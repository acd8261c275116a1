"""Recurrent cells sharing one interface (see :mod:`treelm.cells.base`).

``make_cell(name, input_size, hidden_size, **options)`` builds one by its config name.
"""

from __future__ import annotations

from typing import Any

from treelm.cells.base import Cell, State
from treelm.cells.elman import Elman
from treelm.cells.gru import GRU
from treelm.cells.jordan import Jordan
from treelm.cells.lstm import LSTM
from treelm.cells.mrnn import MRNN, TensorRNN
from treelm.cells.onlstm import ONLSTM

CELLS: dict[str, type[Cell]] = {
    "elman": Elman,
    "jordan": Jordan,
    "lstm": LSTM,
    "gru": GRU,
    "onlstm": ONLSTM,
    "tensor": TensorRNN,
    "mrnn": MRNN,
}


def make_cell(name: str, input_size: int, hidden_size: int, **options: Any) -> Cell:
    if name not in CELLS:
        raise ValueError(f"unknown cell {name!r}; choose one of {', '.join(CELLS)}")
    try:
        return CELLS[name](input_size, hidden_size, **options)
    except TypeError as e:
        raise ValueError(f"bad options for cell {name!r}: {e}") from None


__all__ = ["CELLS", "Cell", "State", "make_cell", "Elman", "GRU", "Jordan", "LSTM", "MRNN",
           "ONLSTM", "TensorRNN"]
