"""The engine: training (`training`, `train_step`, `runtime`, and where a
run goes: `model_dirs`), the evaluation protocol (`evaluation`), scoring
with a checkpoint or a SavedModel (`scoring`), export (`export`), the
embedding projector (`projector`) and the arguments the command-line tools
share (`arguments`). It drives any registered model through the model
interface (`models.base`) and never names a model family."""
