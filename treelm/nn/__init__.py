"""Shared layers: the AWD-LSTM dropouts (declared once for every recurrent model), the embedding
input layer and the multi-layer recurrent stack."""
