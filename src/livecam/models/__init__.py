"""Models: the catalog (catalog.py), downloads (download.py) and the verified store (store.py).

The embedded default models ship in default/ inside the package and are never downloaded.
"""
