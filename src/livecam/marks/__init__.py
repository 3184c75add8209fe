"""Marks that survive processing: the invisible watermark (watermark.py), C2PA content
credentials (credentials.py), and what `livecam verify` reads back (evidence.py)."""
