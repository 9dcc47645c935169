"""Fake credentials in the formats this field prints, and realistic decoys that must survive redaction.

Every secret body is generated here from a seeded RNG (no real credential, nothing a scanner of this
repository would flag as one): ``CREDENTIALS`` is a list of (format, line as printed, needle), where
the needle is the part that must not appear in any exported artefact. ``DECOYS`` are lines the kit
prints that look random or secret-adjacent but are not secrets (hashes, UUIDs, git SHAs, kernel
names, base64 in trace args, tokenizer settings): redaction must leave them as they are.
"""
from __future__ import annotations

import base64
import json
import random
import string

_R = random.Random(20261203)
_AN = string.ascii_letters + string.digits


def _s(n: int, chars: str = _AN) -> str:
    return "".join(_R.choice(chars) for _ in range(n))


def _hex(n: int) -> str:
    return _s(n, "0123456789abcdef")


def _b64(n: int) -> str:
    return _s(n, _AN + "+/")


def _lower(n: int) -> str:
    return _s(n, string.ascii_lowercase + string.digits)


def _pem(kind: str) -> tuple[str, str]:
    body = "\n".join(_s(64, _AN + "+/") for _ in range(4))
    head = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    return f"-----BEGIN {head}-----\n{body}\n-----END {head}-----", body.splitlines()[1]


AKIA = "AKIA" + _s(16, string.ascii_uppercase + string.digits)
AWS_SECRET = _b64(40)
HF = "hf_" + _s(34)
NVAPI = "nvapi-" + _s(64, _AN + "-_")
PASSWORD = "Tr0ub4dor-" + _lower(8)
NCCL_KEY = _hex(32)
LTAI = "LTAI5t" + _s(18)
_KUBE_KEY = base64.b64encode(("-----BEGIN RSA PRIVATE KEY-----\n" + _b64(64) + "\n-----END RSA PRIVATE KEY-----\n")
                             .encode()).decode()

_pems = {k: _pem(k) for k in ("RSA", "OPENSSH", "EC", "ENCRYPTED", "")}
_pgp_body = _b64(64)
_basic = base64.b64encode(f"alice:{PASSWORD}x".encode()).decode()
_jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + base64.urlsafe_b64encode(
    json.dumps({"sub": _lower(10), "exp": 1893456000}).encode()).decode().rstrip("=") + "." + _s(43, _AN + "-_"))
_sa_key, _sa_needle = _pem("")

CREDENTIALS: list[tuple[str, str, str]] = [
    # environment dumps and NAME=value, the way env / printenv / set -x / os.environ print them
    ("env HF_TOKEN", f"HF_TOKEN={HF}", HF),
    ("export HUGGING_FACE_HUB_TOKEN", f"export HUGGING_FACE_HUB_TOKEN={(t := _s(30))}", t),
    ("declare -x HF_HUB_TOKEN", f'declare -x HF_HUB_TOKEN="{(t := _s(28))}"', t),
    ("set -x trace", f"+ export GITHUB_TOKEN={(t := _s(36))}", t),
    ("NCCL_IB_SECRET_KEY env", f"NCCL_IB_SECRET_KEY={NCCL_KEY}", NCCL_KEY),
    ("NCCL log echo of a secret variable",
     f"gpu-node-3:1234:1301 [0] NCCL INFO NCCL_IB_SECRET_KEY set by environment to {(t := _hex(32))}", t),
    ("DJANGO_SECRET_KEY", f"DJANGO_SECRET_KEY='django-insecure-{(t := _s(40, _AN + '!@#%^*(-_=+)'))}'", t),
    ("settings SECRET_KEY", f'SECRET_KEY = "{(t := _s(50))}"', t),
    ("FLASK_SECRET_KEY env", f"FLASK_SECRET_KEY={(t := _hex(48))}", t),
    ("PGPASSWORD", f"PGPASSWORD={(t := _lower(14))} psql -h db -U bench", t),
    ("MYSQL_PWD", f"MYSQL_PWD={(t := _s(16))}", t),
    ("REDIS_PASSWORD", f"REDIS_PASSWORD: {(t := _s(20))}", t),
    ("AWS_SECRET_ACCESS_KEY env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    ("AWS_SESSION_TOKEN env", f"AWS_SESSION_TOKEN={(t := _b64(120))}", t),
    ("aws credentials file", f"[default]\naws_access_key_id = {AKIA}\naws_secret_access_key = {(t := _b64(40))}", t),
    ("boto3 keyword", f"s3 = boto3.client('s3', aws_access_key_id='{AKIA}', "
                      f"aws_secret_access_key='{(t := _b64(40))}')", t),
    ("bare AWS secret beside its id", f"| {AKIA} | {(t := _b64(40))} | us-east-1 |", t),
    ("bare AWS secret before its id", f"secret {(t := _b64(40))} for id {AKIA}", t),
    ("AWS access key id", f"using access key {AKIA} from profile bench", AKIA),
    ("AWS STS id", f"ASIA{(t := _s(16, string.ascii_uppercase + string.digits))}", t),
    ("OPENAI_API_KEY", f"OPENAI_API_KEY=sk-proj-{(t := _s(48, _AN + '-_'))}", t),
    ("ANTHROPIC_API_KEY", f"ANTHROPIC_API_KEY=sk-ant-api03-{(t := _s(60, _AN + '-_'))}", t),
    ("sk- key in a client call", f"client = OpenAI(base_url=url, api_key=\"sk-{(t := _s(40))}\")", t),
    ("NVIDIA nvapi key", f"NGC key: {NVAPI}", NVAPI),
    ("NGC_API_KEY env", f"NGC_API_KEY={(t := 'nvapi-' + _s(64))}", t),
    ("WANDB_API_KEY env", f"WANDB_API_KEY={(t := _hex(40))}", t),
    ("GitHub classic token", f"token ghp_{(t := _s(36))} in use", t),
    ("GitHub fine-grained token", f"github_pat_{(t := _s(22) + '_' + _s(59))}", t),
    ("GitHub OAuth token", f"gho_{(t := _s(36))}", t),
    ("git remote with an app token",
     f"git clone https://x-access-token:ghs_{(t := _s(36))}@github.com/org/repo.git", t),
    ("GitLab token", f"glpat-{(t := _s(20, _AN + '-_'))}", t),
    ("Slack bot token", f"xoxb-{(t := _s(12, string.digits) + '-' + _s(13, string.digits) + '-' + _s(24))}", t),
    ("Slack webhook", f"https://hooks.slack.com/services/T{_s(8, string.ascii_uppercase)}/"
                      f"B{_s(8, string.ascii_uppercase)}/{(t := _s(24))}", t),
    ("Stripe live secret key", f"sk_live_{(t := _s(24))}", t),
    ("Stripe restricted key", f"rk_live_{(t := _s(24))}", t),
    ("Google API key", f"AIza{(t := _s(35, _AN + '-_'))}", t),
    ("Google OAuth access token", f"ya29.{(t := _s(60, _AN + '-_'))}", t),
    ("JWT", f"id_token {_jwt}", _jwt.split(".")[2]),
    ("Authorization Bearer", f"curl -H 'Authorization: Bearer {(t := _s(32))}' http://gpu-node:30000/v1/models", t),
    ("Authorization Basic", f"Authorization: Basic {_basic}", _basic),
    ("headers dict", f"headers = {{'authorization': 'Bearer {(t := _s(40))}', 'accept': 'json'}}", t),
    ("Proxy-Authorization", f"Proxy-Authorization: Basic {(t := _b64(28))}", t),
    ("X-Api-Key header", f"curl -H 'X-Api-Key: {(t := _s(32))}' http://gpu-node:8000/health", t),
    ("curl -u user:pass", f"curl -u bench:{(t := _lower(12))} http://gpu-node:9090/metrics", t),
    ("curl --user user:pass", f"curl --user admin:{(t := _s(14))} https://grafana.internal/api", t),
    ("URL with credentials", f"https://bob:{(t := _s(16))}@artifacts.example.com/model.tar", t),
    ("postgres DSN", f"DATABASE_URL=postgres://bench:{(t := _s(18))}@db:5432/runs", t),
    ("redis URL", f"redis://:{(t := _s(20))}@cache:6379/0", t),
    ("mongodb+srv URL", f"mongodb+srv://ops:{(t := _s(16))}@cluster0.mongodb.net/metrics", t),
    ("pip index URL with token", f"--extra-index-url https://__token__:{(t := _s(30))}@pypi.internal/simple", t),
    ("token in a query string", f"GET /v1/stream?token={(t := _s(32))}&model=llama", t),
    ("S3 presigned URL", f"https://b.s3.amazonaws.com/o?X-Amz-Signature={(t := _hex(64))}&X-Amz-Expires=3600", t),
    ("Azure SAS", f"https://acct.blob.core.windows.net/c?sv=2022-11-02&sig={(t := _b64(43))}%3D", t),
    ("Azure storage connection string",
     f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={(t := _b64(86))}=="
     ";EndpointSuffix=core.windows.net", t),
    ("RSA private key", _pems["RSA"][0], _pems["RSA"][1]),
    ("OpenSSH private key", _pems["OPENSSH"][0], _pems["OPENSSH"][1]),
    ("EC private key", _pems["EC"][0], _pems["EC"][1]),
    ("encrypted private key", _pems["ENCRYPTED"][0], _pems["ENCRYPTED"][1]),
    ("PKCS8 private key", _pems[""][0], _pems[""][1]),
    ("PGP private key block",
     f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{_pgp_body}\n-----END PGP PRIVATE KEY BLOCK-----",
     _pgp_body),
    ("service account JSON", json.dumps({"type": "service_account", "private_key_id": (t := _hex(40)),
                                         "private_key": _sa_key}), _sa_needle),
    ("service account key id", json.dumps({"private_key_id": (t := _hex(40))}), t),
    ("YAML password", f"  password: {(t := _s(16))}", t),
    ("JSON password", json.dumps({"user": "bench", "password": (t := _s(16))}), t),
    ("python db_password", f"db_password = '{(t := _s(16))}'", t),
    ("--password flag", f"mysql --password={(t := _s(14))} -h db", t),
    ("vllm --api-key", f"vllm serve meta-llama/Llama-3.1-8B --api-key {(t := _s(24))}", t),
    ("--hf-token flag", f"python -m sglang.launch_server --hf-token {(t := _s(30))}", t),
    ("os.environ assignment", f'os.environ["HF_TOKEN"] = "{(t := _s(30))}"', t),
    ("os.environ repr", f"environ({{'HOME': '/root', 'HF_TOKEN': '{(t := _s(30))}', 'PATH': '/usr/bin'}})", t),
    ("vLLM non-default args", f"non-default args: {{'model': 'm', 'api_key': '{(t := _s(24))}'}}", t),
    ("SGLang ServerArgs repr", f"ServerArgs(model_path='m', api_key='{(t := _s(24))}', port=30000)", t),
    ("npm token", f"//registry.npmjs.org/:_authToken=npm_{(t := _s(36))}", t),
    ("PyPI token", f"password = pypi-AgEIcHlwaS5vcmc{(t := _s(60, _AN + '-_'))}", t),
    ("SendGrid key", f"SG.{(t := _s(22, _AN + '-_'))}.{_s(43, _AN + '-_')}", t),
    ("Twilio API key", f"SK{(t := _hex(32))}", t),
    ("Telegram bot token", f"{_s(9, string.digits)}:{(t := _s(35, _AN + '-_'))}", t),
    ("Mailchimp key", f"{(t := _hex(32))}-us14", t),
    ("Databricks token", f"dapi{(t := _hex(32))}", t),
    ("Replicate token", f"r8_{(t := _s(37))}", t),
    ("Groq key", f"gsk_{(t := _s(52))}", t),
    ("docker config auth", json.dumps({"auths": {"ghcr.io": {"auth": (t := base64.b64encode(
        f"bob:{_s(20)}".encode()).decode())}}}), t),
    ("netrc", f"machine api.wandb.ai login user password {(t := _s(40))}", t),
    ("HF_TOKEN in a traceback message", f"RuntimeError: probe failed with HF_TOKEN={(t := 'hf_' + _s(34))}", t),
    ("bare hf_ token", f"login with {(t := 'hf_' + _s(34))}", t),
    ("quoted high-entropy key", f'cfg = {{"endpoint": "gpu-node", "k": "{(t := _s(40))}"}}', t),
    # issue 34: Alibaba Cloud keys, kubeconfig client keys, secrets printed only as cells of a text table
    ("Alibaba AccessKey id", f"using access key {LTAI} for oss://bench-traces", LTAI),
    ("Alibaba AccessKey secret beside its id", f"| {LTAI} | {(t := _s(30))} | cn-hangzhou |", t),
    ("kubeconfig client-key-data", f"users:\n- name: admin\n  user:\n    client-certificate-data: {_b64(60)}\n"
                                   f"    client-key-data: {(t := _KUBE_KEY)}", t),
    ("base64 PEM private key", f"key={_KUBE_KEY}", _KUBE_KEY),
    ("secret as a pandas column", f"    user        password  port\n0  bench  {(t := PASSWORD + 'q')}  5432\n"
                                  f"1  admin  {PASSWORD}z  5433", t),
    ("secret as a table row", f"            name                        value\n0        HF_HOME                     "
                              f"/data/hf\n1        API_KEY  {(t := _lower(6) + _s(18))}", t),
    ("secret in a markdown table", f"| host | api_key | model |\n|---|---|---|\n| gpu-node | {(t := _s(22))} | m |",
     t),
]

_b64text = base64.b64encode(json.dumps({"step": 12, "phase": "decode", "batch": [1, 2, 4]}).encode()).decode()
_bdata = base64.b64encode(bytes(range(0, 240, 3))).decode()

DECOYS: list[str] = [
    f"sha256: {_hex(64)}",
    f"md5 {_hex(32)}  model-00001-of-00004.safetensors",
    f"commit {_hex(40)}",
    f"git rev-parse HEAD -> {_hex(40)}, short {_hex(9)}",
    f'"hash": "{_hex(64)}"',
    f"docker pull lmsysorg/sglang@sha256:{_hex(64)}",
    f"pip install vllm --hash=sha256:{_hex(64)}",
    "request id 3f2b8c1e-9a4d-4e6f-b1c2-7d8e9f0a1b2c finished",
    f'"run_id": "{_hex(32)}"',
    "GPU 0: NVIDIA H200 (UUID: GPU-4f3c2a1b-8d9e-7f6a-5b4c-3d2e1f0a9b8c)",
    "00000000:18:00.0 Off",
    '"name": "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>>>'
    '(Params)"',
    '"name": "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"',
    '"name": "triton_poi_fused_add_mul_silu_1"',
    '"name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_'
    'kernel__5x_cublas"',
    '"name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"',
    '"name": "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>, true>(Flash_fwd_params)"',
    '"name": "_ZN7cutlass13device_kernelIN5flash25FlashAttnFwdSm90EEEvNT_6ParamsE"',
    '"name": "_Z23fused_moe_kernel_bf16PKfS0_Pfi"',
    '"name": "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTT"',
    '"name": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn"',
    f'{{"ph": "X", "cat": "kernel", "name": "triton_poi_fused_0", '
    f'"args": {{"correlation": 91823, "payload": "{_b64text}"}}}}',
    f'"args": {{"External id": 4412, "Python id": 1027, '
    f'"Record shapes": "{base64.b64encode(b"[[16, 4096], [4096, 4096]]").decode()}"}}',
    f'{{"type": "scatter", "y": {{"dtype": "f8", "bdata": "{_bdata}"}}}}',
    f'"model_id": "{_hex(32)}"',
    "commHash 0x1b2c3d4e5f607182 nRanks 8",
    "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3 NCCL_SOCKET_IFNAME=eth0 NCCL_IB_GID_INDEX=3",
    "HF_HOME=/data/hf HF_HUB_OFFLINE=1 HF_HUB_ENABLE_HF_TRANSFER=1",
    "MAX_NUM_BATCHED_TOKENS=8192 NCCL_PROTO=LL NCCL_P2P_LEVEL=SYS",
    "Decode batch, #running-req: 1, #token: 108, token usage: 0.00, gen throughput (token/s): 63.60",
    "eos_token: </s>, pad_token_id: 0, max_tokens=128, num_speculative_tokens=4",
    "tokenizer.json: 9.09MB, tokenizer_config.json, special_tokens_map.json",
    "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json",
    "ssh -i ~/.ssh/id_ed25519 -o StrictHostKeyChecking=yes bench@gpu-node-3",
    "password_file = /run/secrets/db_password",
    "PASSED tests/profile/test_kineto.py::test_secret_free",
    "no secret found in 12 files; token budget 4096",
    '"cuda_graph_bs": [1, 2, 4, 8, 16], "disable_cuda_graph": false',
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.71it/s]",
    f"triton cache: ~/.triton/cache/{_s(43, string.ascii_uppercase + string.digits)}/matmul_kernel.cubin",
    f'"stream": 7, "grid": [132, 1, 1], "block": [384, 1, 1], "kernel_id": "{_hex(16)}"',
    f"torch 2.5.1+cu124 git_version {_hex(40)}",
    "deepgemm: fp8_gemm_nt_kernel<128, 128, 64, 4, 8, 1, false>",
    "aten::scaled_dot_product_attention, aten::_flash_attention_forward",
    # tables whose secret-sounding columns hold counts, flags or nothing
    "   step  tokens  token  max_tokens\n0     1     128    108         512\n1     2     256    109         512",
    "           name     value\n0    max_tokens       128\n1  disable_auth      True\n2       api_key      None",
    "| rank | token | auth |\n|---|---|---|\n| 0 | 12 | - |",
    f"client-certificate-data: {_b64(60)}",
]
