"""What goes wrong with a SageMaker job as the one sentence a user reads: a spec SageMaker cannot run as asked,
and AWS failures (what went wrong and what to do)."""

from __future__ import annotations


class SageMakerSetupError(ValueError):
    """A spec SageMaker cannot run as asked; the message is the sentence the user reads."""


NO_CREDENTIALS = (
    "no AWS credentials found; run `aws configure` or `aws sso login`, set AWS_PROFILE or "
    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run where an IAM role is attached"
)
EXPIRED = "the AWS credentials have expired; refresh them (e.g. `aws sso login`) and try again"
NO_REGION = "no AWS region is set; give sagemaker.region in the spec (e.g. us-east-1) or set AWS_DEFAULT_REGION"


#: what an identity needs to submit a training job (the permission most denials are about)
SUBMIT_PERMISSIONS = "sagemaker:CreateTrainingJob and iam:PassRole on the job's role, plus S3 access to the bucket"


def explain(exc: BaseException, *, action: str, role: str | None = None, needs: str = SUBMIT_PERMISSIONS) -> str:
    """One sentence for an exception raised while talking to AWS (botocore's, the SDK's, or others).

    `needs` names the permissions the action takes, for the sentence of an access denial.
    """
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        TokenRetrievalError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return NO_CREDENTIALS
    if isinstance(exc, TokenRetrievalError):
        return EXPIRED
    if isinstance(exc, NoRegionError):
        return NO_REGION
    if isinstance(exc, EndpointConnectionError):
        return f"could not reach AWS to {action} ({exc.kwargs.get('endpoint_url')}); check the network and region"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "Error"), error.get("Message", str(exc)).rstrip(".")
        if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            return EXPIRED
        if code in ("InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"):
            return f"AWS does not accept these credentials ({code}); check AWS_PROFILE or the access keys"
        if code == "ResourceLimitExceeded":
            return (
                f"SageMaker refused to {action}: {message}; request a higher quota in the Service Quotas "
                "console or use another instance type or count"
            )
        if code in ("AccessDenied", "AccessDeniedException"):
            return f"AWS denied permission to {action}: {message}; your identity needs {needs}"
        if role and "role" in message.lower():
            return (
                f"SageMaker cannot use sagemaker.role '{role}' to {action}: {message}; check that the role exists "
                "and trusts sagemaker.amazonaws.com"
            )
        return f"SageMaker refused to {action}: {message} ({code})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"could not {action}: {text}"
