"""spec."""

# model re-exports the loader's names at its end, and the loader imports model: importing
# model first (here, before any submodule) keeps that cycle working whichever submodule a
# caller imports first (``core.ledger.jobs`` imports ``core.spec.loader`` directly).
from core.spec import model as _model  # noqa: F401, E402
