"""One module per dataset family, each holding its reader and its synthetic writer.

The registry (semcl.data.registry) names them by "module:function" references, so nothing here
is imported until a dataset of the family is read or written.
"""
