from ._state import (
    CLOCK_SKEW as CLOCK_SKEW,
    AdmissionHistory as AdmissionHistory,
    Changes as Changes,
    Counted as Counted,
    EngineSubject as EngineSubject,
    Evaluation as Evaluation,
    ImageSubject as ImageSubject,
    VerifiedBuild as VerifiedBuild,
    WorkloadSubject as WorkloadSubject,
)
