"""Shared layers: AWD-LSTM dropouts and the multi-layer recurrent stack."""
