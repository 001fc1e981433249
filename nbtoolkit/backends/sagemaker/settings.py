"""The `sagemaker:` block of a spec: what only a SageMaker training job needs (its instance type is in hardware)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator, model_validator

from nbtoolkit.spec_parts.block import SpecBlock

#: the one placeholder an image URI may hold: the job's region, put in by submit and by the exported scripts alike
REGION_PLACEHOLDER = "{region}"


def region_image(image_uri: str, region: str) -> str:
    """The image URI for `region` (plain replacement: no other brace is read)."""
    return image_uri.replace(REGION_PLACEHOLDER, region)


class SageMakerSpec(SpecBlock):
    """Settings only a SageMaker training job needs (instance type lives in hardware; `sagemaker.instance_type`
    and `sagemaker.instance_count` are accepted as aliases of `hardware.instance_type` and `hardware.nodes`).

    Fields with a title are the form's SageMaker section."""

    model_config = ConfigDict(title="SageMaker")

    role: str | None = Field(None, title="IAM role ARN", description="IAM role ARN the job runs as")
    region: str | None = Field(None, title="Region", description="AWS region of the job; default AWS_DEFAULT_REGION")
    bucket: str | None = Field(
        None, title="S3 bucket", description="S3 bucket for the job's code and output; default the SDK's own"
    )
    image_uri: str | None = Field(
        None,
        title="Image URI",
        description="the training image, instead of the Hugging Face image looked up; may hold {region}",
    )
    transformers_version: str | None = Field(
        None, description="of the Hugging Face image looked up; default the newest the SDK knows"
    )
    pytorch_version: str | None = Field(
        None, description="of the Hugging Face image looked up; default the newest the SDK knows"
    )
    py_version: str | None = Field(
        None, description="of the Hugging Face image looked up; default the one that image has"
    )
    volume_size_gb: int = Field(100, ge=1, title="Volume (GB)", description="storage attached to each instance")
    spot: bool = Field(
        False,
        title="Spot instances",
        description="managed spot training: cheaper, may be interrupted; checkpoints sync to S3",
    )
    max_run: int = Field(24 * 3600, ge=60, title="Max run (s)", description="seconds")
    max_wait: int | None = Field(
        None,
        ge=60,
        title="Max wait (s)",
        description="seconds; spot only, at least max_run",
        json_schema_extra={"shown_when": {"spot": True}},
    )
    checkpoint_s3_uri: str | None = Field(
        None, title="Checkpoint S3 URI", description="where checkpoints sync to; spot default the SDK's own"
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="environment variables of the job, beside nbtoolkit's own"
    )

    @field_validator("image_uri")
    @classmethod
    def _only_the_region_placeholder(cls, image_uri: str | None) -> str | None:
        if image_uri is not None and {"{", "}"} & set(image_uri.replace(REGION_PLACEHOLDER, "")):
            raise ValueError(
                f"sagemaker.image_uri '{image_uri}' holds a brace other than {REGION_PLACEHOLDER}; an image URI may "
                f"name the job's region as {REGION_PLACEHOLDER} and has no other placeholder"
            )
        return image_uri

    @model_validator(mode="after")
    def _spot_rules(self) -> SageMakerSpec:
        if self.role is not None and not self.role.startswith("arn:aws"):
            raise ValueError(
                f"sagemaker.role '{self.role}' is not an IAM role ARN; expected arn:aws:iam::<account>:role/<name>"
            )
        if self.max_wait is not None and not self.spot:
            raise ValueError("sagemaker.max_wait only applies to spot jobs; set spot: true or remove max_wait")
        if self.spot and self.max_wait is not None and self.max_wait < self.max_run:
            raise ValueError(
                f"sagemaker.max_wait {self.max_wait} is shorter than max_run {self.max_run}; "
                "spot jobs need max_wait >= max_run"
            )
        return self
