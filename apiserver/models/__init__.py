"""Our own kinds (kmc.dev/v1alpha1) as pydantic models: Location, APIImport, Override and
ClusterOverride here (`override_index.py` reads the overrides and files them by target), the
PlacementPolicy beside the rules that read it (`placement/policy.py`). Each agrees with its
CRD in `manifests/crds/` field by field (`tests/unit/test_crd_models.py`)."""
