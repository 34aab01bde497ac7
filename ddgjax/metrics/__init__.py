"""Evaluation metrics: graph statistics, MMDs under two protocols, validity, V.U.N."""
