"""Methods: one package per family (config schemas + MethodSpec in its __init__, the Method subclass in
method.py), registered in semcl.methods.registry.METHODS. Importing this package imports no torch."""
