"""A composition function written with crossplane-function-sdk-python and served by the SDK's
own gRPC server (the end-to-end tests start it as its own process).

It composes one NopResource, `sdk-made`, whose fields carry the XR's `spec.size`; writes the
XR's `status.sdkSize`; and requires the XR's own schema (`required_schemas`), reporting the
spec fields it found there in `status.schemaFields` once the schema is answered. A result
tells what it did.

Flags as the SDK's templates name them: --address, --tls-certs-dir (or TLS_SERVER_CERTS_DIR),
--insecure; and --calls-file, a file that gets one line per call (tests count the calls with it),
and --ttl-seconds, how long a response may be reused (the SDK's default is a minute).
"""

import argparse
import datetime
import os

from crossplane.function import request, resource, response, runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class Runner(grpcv1.FunctionRunnerServiceServicer):
    """Composes `sdk-made` from the XR."""

    def __init__(self, calls_file: str | None, ttl: datetime.timedelta):
        self.calls_file = calls_file
        self.ttl = ttl

    async def RunFunction(self, req: fnv1.RunFunctionRequest, _context) -> fnv1.RunFunctionResponse:  # noqa: N802
        if self.calls_file:
            with open(self.calls_file, "a", encoding="utf-8") as calls:
                calls.write(f"{req.meta.tag}\n")
        rsp = response.to(req, ttl=self.ttl)
        xr = resource.struct_to_dict(req.observed.composite.resource)
        size = xr.get("spec", {}).get("size", "unset")
        resource.update(
            rsp.desired.resources["sdk-made"],
            {
                "apiVersion": "nop.crossplane.io/v1alpha1",
                "kind": "NopResource",
                "spec": {
                    "forProvider": {
                        "conditionAfter": [{"time": "0s", "conditionType": "Ready", "conditionStatus": "True"}],
                        "fields": {"size": size, "madeBy": "crossplane-function-sdk-python"},
                    }
                },
            },
        )
        status = {"sdkSize": size}
        if request.has_capability(req, fnv1.CAPABILITY_REQUIRED_SCHEMAS):
            response.require_schema(rsp, "xr", xr["apiVersion"], xr["kind"])
            if "xr" in req.required_schemas:
                schema = request.get_required_schema(req, "xr")
                if schema is None:
                    status["schemaFields"] = "not found"
                else:
                    fields = schema.get("properties", {}).get("spec", {}).get("properties", {})
                    status["schemaFields"] = ",".join(sorted(fields))
        composite = resource.struct_to_dict(rsp.desired.composite.resource)
        composite.setdefault("status", {}).update(status)
        rsp.desired.composite.resource.Clear()
        resource.update(rsp.desired.composite, composite)
        response.normal(rsp, f"composed sdk-made of size {size}")
        return rsp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default="0.0.0.0:9443")
    parser.add_argument("--tls-certs-dir", default=os.environ.get("TLS_SERVER_CERTS_DIR"))
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--calls-file")
    parser.add_argument("--ttl-seconds", type=float, default=response.DEFAULT_TTL.total_seconds())
    args = parser.parse_args()
    runtime.serve(
        Runner(args.calls_file, datetime.timedelta(seconds=args.ttl_seconds)),
        args.address,
        creds=None if args.insecure else runtime.load_credentials(args.tls_certs_dir),
        insecure=args.insecure,
    )


if __name__ == "__main__":
    main()
