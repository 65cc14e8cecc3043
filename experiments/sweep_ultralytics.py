"""ultralytics models for the sweep: YOLO detection, instance segmentation, pose, oriented
boxes (OBB), classification, semantic segmentation and depth, and RT-DETR, each built from
its model yaml with the task's model class (``DetectionModel("yolov8n.yaml")``, what
``YOLO("yolov8n.yaml").model`` is), random weights, eval mode; the smallest scale (``n``,
``t`` for YOLOv9, ``l`` for RT-DETR).

Nothing is downloaded: building from a yaml fetches no weights, ``YOLO_OFFLINE`` turns the
online check off, settings go to a temporary folder, and the sweep closes the network
anyway (``sweep_libs.close_network``). ultralytics imports OpenCV (``cv2``), which the
headless build supplies.

Examples: 64-pixel images, batch 1 then 2, and (optional) batch 1 at 96 pixels.
"""

from __future__ import annotations

import os
import tempfile

from sweep_libs import Built, construct, images

# before ultralytics is imported: it reads these once
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_VERBOSE", "False")
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(tempfile.gettempdir(),
                                                      "stitch-sweep-ultralytics"))

TASK_SUFFIX = {"detect": "", "segment": "-seg", "pose": "-pose", "obb": "-obb",
               "classify": "-cls"}
GENERATIONS = ("yolov8n", "yolo11n", "yolo12n", "yolo26n")
# name -> task: every task of each generation, then single-task models
MODELS = {f"{g}{suffix}": task for g in GENERATIONS for task, suffix in TASK_SUFFIX.items()}
MODELS |= {"yolo26n-sem": "semantic", "yolo26n-depth": "depth", "yolov10n": "detect",
           "yolov9t": "detect", "yolov6n": "detect", "yolov5n": "detect",
           "yolov3-tiny": "detect", "rtdetr-l": "rtdetr", "yolov8n-rtdetr": "rtdetr"}
CLASSES = {"detect": "DetectionModel", "segment": "SegmentationModel", "pose": "PoseModel",
           "obb": "OBBModel", "classify": "ClassificationModel",
           "semantic": "SemanticSegmentationModel", "depth": "DepthModel",
           "rtdetr": "RTDETRDetectionModel"}
SIZES = (64, 96)
MAX_PARAMS = 40_000_000  # RT-DETR-l has 33M


def architectures() -> dict[str, str]:
    return dict(sorted(MODELS.items()))


def build(name: str) -> Built:
    from ultralytics.nn import tasks

    make = getattr(tasks, CLASSES[MODELS[name]])
    model = construct(make, f"{name}.yaml", verbose=False, max_params=MAX_PARAMS)
    first, second, other = images(3, [(1, SIZES[0], SIZES[0]), (2, SIZES[0], SIZES[0]),
                                      (1, SIZES[1], SIZES[1])])
    return Built(model, [((first,), {}), ((second,), {})], [((other,), {})])
