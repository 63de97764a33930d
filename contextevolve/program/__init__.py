"""Program text: Generator replies, edit forms, normalisation and twins, docstrings, mechanical fixes.

Pure text in, text out: nothing here calls a model or reads the Evolve Buffer.
"""
