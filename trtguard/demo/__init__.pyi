from ._engine import stand_in_onnx as stand_in_onnx, stand_in_plan as stand_in_plan
