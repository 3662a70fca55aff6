"""A FastAPI model server that logs every prediction to fleetwatch.

Serves a scikit-learn classifier trained at start-up on scikit-learn's bundled
breast-cancer dataset (no download). ``POST /predict`` answers with the
malignancy score and logs the prediction; ``POST /label`` logs the ground
truth once it is known; ``GET /stats`` shows the SDK's counters.

Run (Kafka at FLEETWATCH_KAFKA_BOOTSTRAP, or ``--bootstrap``)::

    python examples/fastapi_server.py --port 8080 --bootstrap localhost:9092
    curl -s localhost:8080/predict -H 'content-type: application/json' \\
         -d '{"features": {"mean radius": 14.1, "mean texture": 19.3}}'

Missing features are imputed with the training mean (and logged as missing).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import time
import uuid

import numpy as np
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, Field
from sklearn.datasets import load_breast_cancer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sdk import AsyncClient

MODEL_ID = "breast-cancer"
MODEL_VERSION = "1"


class PredictRequest(BaseModel):
    features: dict[str, float | None] = Field(..., description="Feature name -> value")
    prediction_id: str | None = Field(None, description="Your request id (default: a new UUID)")


class LabelRequest(BaseModel):
    prediction_id: str
    label: bool = Field(..., description="True if the tumour was malignant")


def create_app(client: AsyncClient) -> FastAPI:
    """The model server: trains the model, starts and closes ``client`` with the app."""
    data = load_breast_cancer()
    names = [str(n) for n in data.feature_names]
    model = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=1_000))
    model.fit(data.data, data.target == 0)  # target 0 is malignant

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with client:  # flushes what is buffered on shutdown
            yield

    app = FastAPI(title="breast-cancer model server", lifespan=lifespan)

    @app.post("/predict")
    async def predict(request: PredictRequest) -> dict:
        start = time.perf_counter()
        row = np.array([[np.nan if request.features.get(n) is None else request.features[n]
                         for n in names]])
        score = float(model.predict_proba(row)[0, 1])
        prediction_id = request.prediction_id or uuid.uuid4().hex
        client.log_prediction(
            MODEL_ID, request.features, model_version=MODEL_VERSION, prediction_id=prediction_id,
            score=score, predicted_label=score >= 0.5, latency_ms=(time.perf_counter() - start) * 1e3,
        )
        return {"prediction_id": prediction_id, "score": score, "malignant": score >= 0.5}

    @app.post("/label")
    async def label(request: LabelRequest) -> dict:
        client.log_label(MODEL_ID, request.prediction_id, request.label)
        return {"prediction_id": request.prediction_id}

    @app.get("/stats")
    async def stats() -> dict:
        return dataclasses.asdict(client.stats)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="FastAPI model server with fleetwatch")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--bootstrap", default=os.environ.get("FLEETWATCH_KAFKA_BOOTSTRAP", "localhost:9092"))
    parser.add_argument("--topic", default=os.environ.get("FLEETWATCH_PREDICTIONS_TOPIC", "fw.predictions"))
    parser.add_argument("--labels-topic", default="fw.labels")
    parser.add_argument("--linger-ms", type=float, default=100.0)
    args = parser.parse_args()
    client = AsyncClient(args.bootstrap, args.topic, labels_topic=args.labels_topic, linger_ms=args.linger_ms)
    uvicorn.run(create_app(client), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
