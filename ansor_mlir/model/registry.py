"""Cost models and feature extractors by name, and the model the package ships.

`make_cost_model` takes an instance as it is, a name (`xgb`, with
`xgb-pairwise`, `xgb-regression`, `xgb-lambdarank` naming its objective) or
a saved model file; a saved model names the extractor it was trained on, and
is refused with the message to retrain it when that extractor's features
changed since.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ansor_mlir.errors import AnsorError
from ansor_mlir.model.cost_model import CostModel
from ansor_mlir.model.feature_extractor import FeatureExtractor, KnobFeatures
from ansor_mlir.model.program_features import ProgramFeatures
from ansor_mlir.model.xgb_model import OBJECTIVES, XGBModel, read_booster

EXTRACTORS: dict[str, type] = {"knobs": KnobFeatures, "program": ProgramFeatures}
DEFAULT_EXTRACTOR = "program"
DEFAULT_OBJECTIVE = "pairwise"
MODELS = ("xgb", *(f"xgb-{o}" for o in OBJECTIVES))
PRETRAINED = "cost_model.json"


def make_feature_extractor(choice: str | FeatureExtractor = DEFAULT_EXTRACTOR) -> FeatureExtractor:
    """An extractor by name (`knobs`, `program`), or the instance given."""
    if not isinstance(choice, str):
        return choice
    if choice not in EXTRACTORS:
        raise AnsorError(f"unknown feature extractor '{choice}': choose one of {', '.join(EXTRACTORS)}")
    return EXTRACTORS[choice]()


def make_cost_model(choice: str | Path | CostModel = "xgb",
                    extractor: str | FeatureExtractor = DEFAULT_EXTRACTOR) -> CostModel:
    """An untrained model by name, a saved one by path, or the instance given."""
    if isinstance(choice, CostModel):
        return choice
    if isinstance(choice, Path):
        return load_cost_model(choice)
    name, _, objective = choice.partition("-")
    if name != "xgb" or (objective and objective not in OBJECTIVES):
        raise AnsorError(f"unknown cost model '{choice}': choose one of {', '.join(MODELS)} or a model file")
    return XGBModel(make_feature_extractor(extractor), objective or DEFAULT_OBJECTIVE)


def load_cost_model(path: Path) -> CostModel:
    """A saved model, with the extractor it names (models saved before extractors had names: `knobs`)."""
    booster = read_booster(path)
    name = booster.attr("extractor") or "knobs"
    if name not in EXTRACTORS:
        raise AnsorError(f"{path}: trained on features '{name}', which this version does not have; retrain it")
    return XGBModel.from_booster(booster, EXTRACTORS[name](), path)


def pretrained_model() -> CostModel | None:
    """The model shipped in the package, or None if it is absent or stale."""
    path = resources.files("ansor_mlir") / "data" / PRETRAINED
    if not path.is_file():
        return None
    try:
        return load_cost_model(Path(str(path)))
    except AnsorError:
        return None
