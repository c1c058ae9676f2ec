"""The HTTP protocol of an aggregated API server: errors, discovery, OpenAPI, tables, auth."""
