from ._admission_history import DecisionLogHistory as DecisionLogHistory
from ._logging import configure_logging as configure_logging
from ._server import run as run
from ._settings import DEFAULT_DECISION_LOG as DEFAULT_DECISION_LOG, load_settings as load_settings
