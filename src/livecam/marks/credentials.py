"""C2PA content credentials: a signed manifest saying what livecam did, embedded in the output.

Signing uses c2pa-python (the `c2pa` extra). What it accepts, found by trying it (c2pa-python
0.38, c2pa-rs 0.91): a PEM certificate chain (signer first, then its issuers) and a PEM private
key, with the algorithm matching the key: ES256/ES384/ES512 (EC P-256/384/521), PS256/384/512
(RSA-PSS) or Ed25519. The signer certificate must be an end-entity one (CA:false) with key usage
digitalSignature, an extended key usage such as emailProtection, and an authority key
identifier: a lone self-signed certificate is refused ("the certificate is invalid"), so the
local identity is a small local CA plus a signer certificate it issued. The manifest's first
action must be c2pa.opened (with the input as parent ingredient) or c2pa.created.

Which identity signs: --c2pa-cert/--c2pa-key, else LIVECAM_C2PA_CERT/LIVECAM_C2PA_KEY, else a
local one generated on first use in the user data folder (LIVECAM_C2PA_DIR overrides the
folder), reported as self-signed: readers show the manifest as valid but its signer as not
on the C2PA trust list.
"""

from __future__ import annotations

import datetime
import errno
import io
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from livecam import __version__
from livecam.atomic import FULL, AtomicOutput, OutputConflictError
from livecam.interrupt import heard
from livecam.errors import InputError, LivecamError, OutputError
from livecam.media.provenance import DIGITAL_SOURCE_TYPE
from livecam.paths import why_missing

log = logging.getLogger("livecam")

# Output extensions c2pa-python signs, and their MIME types.
MIME_TYPES: dict[str, str] = {
    ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp",
    ".tif": "image/tiff", ".tiff": "image/tiff", ".mp4": "video/mp4", ".m4v": "video/mp4",
    ".mov": "video/quicktime",
}
LOCAL_IDENTITY = "local-signer.pem"  # the local CA's signer key + certificate chain, one file
LOCAL_ISSUER = "livecam local signer (self-signed, not on the C2PA trust list)"
INGREDIENT_LIMIT = 200 << 20  # a larger input is named in the manifest, not read as an ingredient


INSTALL_HINT = "pip install 'livecam[c2pa]'"  # the extra in pyproject.toml that brings c2pa-python


def available() -> bool:
    try:
        import c2pa  # noqa: F401
    except ImportError:
        return False
    return True


def check_requested(flags: Sequence[str]) -> None:
    """Signing asked for on the command line (`flags`: --c2pa, --c2pa-cert, --c2pa-key as typed)
    needs c2pa-python: without it, a refusal before any work, where the default is a warning
    (signing_for): an explicit --c2pa wrote unsigned outputs and exited 0."""
    if flags and not available():
        raise InputError(f"{' and '.join(flags)} {'asks' if len(flags) == 1 else 'ask'} for C2PA content "
                         f"credentials, but c2pa-python is not installed: {INSTALL_HINT}, or drop "
                         f"{' and '.join(flags)}")


def mime_type(path: Path) -> str | None:
    return MIME_TYPES.get(path.suffix.lower())


def content_mime_type(path: Path) -> str | None:
    """The MIME type the file's first bytes say (a PNG named .jpg is a PNG), among those C2PA
    reads; None for anything else. Used for the input, whose name may not match its content."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return None
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if head[4:8] == b"ftyp":
        return "video/quicktime" if head[8:12] == b"qt  " else "video/mp4"
    return None


@dataclass(frozen=True)
class Identity:
    """Who signs: a PEM chain and key, the algorithm for the key, and whether it is livecam's
    locally generated one."""

    chain_pem: bytes
    key_pem: bytes
    algorithm: str
    self_signed: bool
    origin: Path

    def describe(self) -> str:
        return (f"self-signed local identity {self.origin} (not on the C2PA trust list; pass --c2pa-cert "
                f"and --c2pa-key for a trusted one)" if self.self_signed else f"certificate {self.origin}")


def algorithm_for(key: Any) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {256: "ES256", 384: "ES384", 521: "ES512"}.get(key.curve.key_size, "")
    if isinstance(key, rsa.RSAPrivateKey):
        return "PS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "ED25519"
    return ""


def load_identity(cert: Path | None, key: Path | None, *, environ: dict[str, str] | None = None) -> Identity:
    """The identity to sign with (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    # where each came from, for the message: a path from the environment was called --c2pa-cert
    cert_from = "--c2pa-cert" if cert else "LIVECAM_C2PA_CERT"
    key_from = "--c2pa-key" if key else "LIVECAM_C2PA_KEY"
    cert = cert or (Path(env["LIVECAM_C2PA_CERT"]) if env.get("LIVECAM_C2PA_CERT") else None)
    key = key or (Path(env["LIVECAM_C2PA_KEY"]) if env.get("LIVECAM_C2PA_KEY") else None)
    if (cert is None) != (key is None):
        raise InputError("C2PA signing needs both a certificate chain and its private key: give --c2pa-cert "
                         "and --c2pa-key (or LIVECAM_C2PA_CERT and LIVECAM_C2PA_KEY) together")
    if cert is not None and key is not None:
        chain = _read_pem(cert, f"certificate chain ({cert_from})")
        key_pem = _read_pem(key, f"private key ({key_from})")
        pkcs8, algorithm = _signing_key(key_pem, key)
        return Identity(chain, pkcs8, algorithm, self_signed=False, origin=cert)
    return local_identity(local_folder(env))


def _read_pem(path: Path, what: str) -> bytes:
    """One of the two files, named with where it was given when it cannot be read."""
    fix = "give a readable PEM file, or pass --no-c2pa"
    try:
        return path.read_bytes()
    except OSError as exc:
        if not path.exists():  # missing, a link to nothing or in a loop: said as for every other input
            raise InputError(f"the C2PA {what} {path} {why_missing(path, fix)}") from exc
        raise InputError(f"cannot read the C2PA {what} {path}: {exc.strerror or exc}; {fix}") from exc


def _signing_key(key_pem: bytes, where: Path) -> tuple[bytes, str]:
    """The key as PKCS#8 PEM, and its algorithm. c2pa reads PKCS#8 only: a traditional key
    ("BEGIN EC PRIVATE KEY", as `openssl ecparam -genkey` writes) was refused at signing time."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        private = load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where} is not an unencrypted PEM private key; give the signer's key "
                         f"(PKCS#8 or traditional PEM, no passphrase)") from exc
    algorithm = algorithm_for(private)
    if not algorithm:
        raise InputError(f"{where}: C2PA signs with EC P-256/384/521, RSA or Ed25519 keys only")
    pkcs8 = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    return pkcs8, algorithm


def local_folder(env: Any) -> Path:
    if env.get("LIVECAM_C2PA_DIR"):
        return Path(env["LIVECAM_C2PA_DIR"])
    from platformdirs import user_data_dir

    return Path(user_data_dir("livecam")) / "c2pa"


def local_identity(folder: Path) -> Identity:
    """The locally generated identity, created on first use (key first, then the chain)."""
    path = folder / LOCAL_IDENTITY
    if not path.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with AtomicOutput(path, what="C2PA identity ") as out:
                out.write_bytes(_generate_identity())
                os.chmod(out.temp, 0o600)  # the private key is in it
            log.warning("note: created a self-signed C2PA signing identity in %s; outputs' content "
                        "credentials are valid but not trusted (give --c2pa-cert/--c2pa-key for that)", path)
        except OutputConflictError:
            pass  # another livecam made one at the same moment: use that one
        except (OSError, LivecamError) as exc:
            cause = exc if isinstance(exc, OSError) else exc.__cause__ or exc.__context__  # AtomicOutput's
            if not isinstance(cause, OSError):
                raise
            raise OutputError(_identity_problem(folder, cause)) from exc
    data = path.read_bytes()
    marker = b"-----BEGIN CERTIFICATE-----"
    start = data.index(marker)
    return Identity(data[start:], data[:start], "ES256", self_signed=True, origin=path)


def _identity_problem(folder: Path, exc: OSError) -> str:
    """Why the local identity could not be written in `folder`, with the ways out: another
    folder, or --no-c2pa (a full disk named only the file and said "free some space")."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"cannot create the C2PA identity in {folder}: {FULL}; free some space, set LIVECAM_C2PA_DIR "
                f"to a folder on another disk, or pass --no-c2pa to write the output without content credentials")
    return (f"cannot create the C2PA identity in {folder} ({exc.strerror or exc}); set LIVECAM_C2PA_DIR to a "
            f"writable folder or pass --no-c2pa")


def _generate_identity() -> bytes:
    """PEM: the signer's P-256 key, its certificate, and the local CA certificate that issued it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "livecam (self-signed)")])

    def usage(*, sign: bool) -> x509.KeyUsage:
        return x509.KeyUsage(digital_signature=sign, content_commitment=False, key_encipherment=False,
                             data_encipherment=False, key_agreement=False, key_cert_sign=not sign,
                             crl_sign=not sign, encipher_only=False, decipher_only=False)

    def certificate(subject: str, issuer: str, public: Any, issuer_key: Any, ca: bool) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                   .public_key(public).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                   .add_extension(usage(sign=not ca), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                  critical=False))
        if not ca:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]),
                                            critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("livecam local CA", "livecam local CA", ca_key.public_key(), ca_key, True)
    signer = certificate("livecam local signer", "livecam local CA", key.public_key(), ca_key, False)
    pem = serialization.Encoding.PEM
    return (key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            + signer.public_bytes(pem) + ca.public_bytes(pem))


@dataclass(frozen=True)
class Signing:
    """Everything needed to sign one output: who signs (None: the local identity, made on first
    use when the first output is signed, not before), what went in, which models were used."""

    identity: Identity | None
    input: Path | None
    models: tuple[str, ...]
    local_folder: Path | None = None  # where the local identity lives (None: the default folder)

    def signer_identity(self) -> Identity:
        if self.identity is not None:
            return self.identity
        return local_identity(self.local_folder or local_folder(os.environ))

    def manifest(self, title: str, with_parent: bool) -> dict[str, Any]:
        agent = {"name": "livecam", "version": __version__}
        edited = {"action": "c2pa.edited", "digitalSourceType": DIGITAL_SOURCE_TYPE, "softwareAgent": agent,
                  "description": "faces swapped by livecam", "parameters": {"models": list(self.models)}}
        first: dict[str, Any] = ({"action": "c2pa.opened", "parameters": {"ingredientIds": ["input"]}}
                                 if with_parent else {"action": "c2pa.created", "digitalSourceType": DIGITAL_SOURCE_TYPE,
                                                      "softwareAgent": agent})
        return {"claim_generator_info": [agent], "title": title,
                "assertions": [{"label": "c2pa.actions", "data": {"actions": [first, edited]}}]}

    def sign_bytes(self, data: bytes, output: Path) -> bytes:
        """The output's encoded bytes with the manifest embedded."""
        fmt = mime_type(output)
        if fmt is None:
            return data
        dest = io.BytesIO()
        self._sign(io.BytesIO(data), dest, fmt, output.name)
        return dest.getvalue()

    def sign_file(self, temp: Path, output: Path, copy: AtomicOutput | None = None) -> None:
        """Embed the manifest into the written (still temporary) file `temp` of `output`, through
        `copy` (AtomicOutput(temp, force=True, shown=output)), which a caller passes when another
        thread may have to discard it while signing is stuck (a live recording's abandon)."""
        fmt = mime_type(output)
        if fmt is None:
            return
        try:
            with copy or AtomicOutput(temp, force=True, shown=output) as out, open(temp, "rb") as src, \
                    open(out.temp, "wb") as dest:
                self._sign(src, dest, fmt, output.name)
        except OutputError as exc:
            # The signed copy is written beside the finished file: a video that fitted the disk
            # was lost at its end with only "the disk is full", no word of why or of --no-c2pa.
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
                raise OutputError(f"writing {output} failed while signing its content credentials, which "
                                  f"needs room for a second copy of it: {FULL}; free some space, choose "
                                  f"another folder, or pass --no-c2pa") from cause
            raise

    def _sign(self, source: Any, dest: Any, fmt: str, title: str) -> None:
        import c2pa

        parent = self.input if self.input is not None and content_mime_type(self.input) else None
        if parent is not None and parent.stat().st_size > INGREDIENT_LIMIT:
            parent = None
        identity = self.signer_identity()  # here: it may write the local identity's files
        # c2pa's native code, in a thread: a hang there left Ctrl-C and SIGTERM unheard
        heard(lambda: self._sign_as(c2pa, identity, parent, source, dest, fmt, title), "livecam-c2pa")

    def _sign_as(self, c2pa: Any, identity: Identity, parent: Path | None, source: Any, dest: Any, fmt: str,
                 title: str) -> None:
        try:
            signer = c2pa.Signer.from_info(c2pa.C2paSignerInfo(
                getattr(c2pa.C2paSigningAlg, identity.algorithm), identity.chain_pem, identity.key_pem, None))
        except Exception as exc:  # c2pa's own error types
            raise InputError(f"C2PA refused the signing identity {identity.origin} ({_first_line(exc)}); "
                             f"it needs an end-entity certificate chain (PEM) and its key") from exc
        try:
            try:
                self._build(c2pa, signer, parent, source, dest, fmt, title)
            except Exception:  # noqa: BLE001 - a damaged input c2pa cannot parse as an ingredient
                if parent is None:
                    raise
                log.debug("C2PA: %s could not be read as the parent ingredient; signing without it", parent)
                source.seek(0)
                dest.seek(0)
                dest.truncate()
                self._build(c2pa, signer, None, source, dest, fmt, title)
        except Exception as exc:  # c2pa's own error types
            if "Signature" in type(exc).__name__ or "certificate" in str(exc):
                raise InputError(f"C2PA refused the signing certificate {identity.origin} "
                                 f"({_first_line(exc)}); give the chain of an end-entity certificate "
                                 f"(not a CA, not self-signed) and its key, or pass --no-c2pa") from exc
            raise OutputError(f"could not sign the content credentials of {title} ({_first_line(exc)}); "
                              f"pass --no-c2pa to write it without them") from exc
        finally:
            signer.close()

    def _build(self, c2pa: Any, signer: Any, parent: Path | None, source: Any, dest: Any, fmt: str,
               title: str) -> None:
        # No thumbnails: the input's would put the unswapped original inside the output.
        context = c2pa.Context.from_dict({"builder": {"thumbnail": {"enabled": False}}})
        with c2pa.Builder(json.dumps(self.manifest(_unicode(title), parent is not None)), context) as builder:
            if parent is not None:
                with open(parent, "rb") as ingredient:
                    builder.add_ingredient(json.dumps({"title": _unicode(parent.name), "relationship": "parentOf",
                                                       "label": "input"}), content_mime_type(parent), ingredient)
            builder.sign(signer, fmt, source, dest)


def _unicode(name: str) -> str:
    """A file name as text C2PA takes: a name that is not UTF-8 (bytes Python keeps as lone
    surrogates) made the manifest's JSON invalid, so such an output failed to be written and such
    an input was left out as the parent ingredient (the output claimed to be created, not edited)."""
    return os.fsencode(name).decode("utf-8", "replace")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


@dataclass(frozen=True)
class Credentials:
    """What verify found: a manifest or not, its validation state and its claims."""

    present: bool
    state: str = ""  # c2pa's validation state: Invalid, Valid (signer untrusted) or Trusted
    failures: tuple[str, ...] = ()
    generator: str = ""
    actions: tuple[str, ...] = ()
    digital_source_type: str = ""
    signer: str = ""
    note: str = ""  # why nothing could be read, when not present

    @property
    def valid(self) -> bool:
        return self.present and self.state in ("Valid", "Trusted")

    @property
    def by_livecam(self) -> bool:
        return self.valid and self.generator.startswith("livecam")


def read_credentials(path: Path) -> Credentials:
    """The C2PA manifest in `path`, validated by c2pa's own Reader."""
    fmt = mime_type(path)
    if fmt is None:
        return Credentials(False, note=f"C2PA is not read in {path.suffix or 'extension-less'} files")
    if not available():
        return Credentials(False, note=f"c2pa-python is not installed ({INSTALL_HINT})")
    import c2pa

    try:
        with open(path, "rb") as fh, c2pa.Reader(fmt, fh) as reader:
            state = reader.get_validation_state() or ""
            results = reader.get_validation_results() or {}
            active = reader.get_active_manifest() or {}
    except Exception as exc:  # c2pa's own error types; ManifestNotFound is the common one
        missing = "ManifestNotFound" in type(exc).__name__ or "ManifestNotFound" in str(exc)
        return Credentials(False, note="no manifest" if missing else _first_line(exc))
    failures = tuple(item.get("code", "") for item in (results.get("activeManifest") or {}).get("failure", []))
    generator = " ".join(str(g.get(k, "")) for g in active.get("claim_generator_info", [])[:1]
                         for k in ("name", "version")).strip()
    actions, source = [], ""
    for assertion in active.get("assertions", []):
        if str(assertion.get("label", "")).startswith("c2pa.actions"):
            for action in assertion.get("data", {}).get("actions", []):
                actions.append(str(action.get("action", "")))
                source = source or str(action.get("digitalSourceType", ""))
    signature = active.get("signature_info") or {}
    signer = str(signature.get("issuer") or signature.get("common_name") or "")
    return Credentials(True, state=state, failures=failures, generator=generator, actions=tuple(actions),
                       digital_source_type=source, signer=signer)


def signing_for(settings: Any, input: Path | None, models: tuple[str, ...],
                outputs: Sequence[Path] = ()) -> Signing | None:
    """The Signing for an output under these settings.C2paSettings, or None when --no-c2pa or
    when c2pa-python is missing (said once, as a warning: the other marks are still written; a
    --c2pa typed was refused already, check_requested).
    When one of `outputs` is a kind that gets signed, the local identity is made (or refused)
    now, before the work: made at the end, a failure (a read-only home) lost the whole output;
    the kinds C2PA cannot be written into (.webm, .mkv) are said once, as a warning."""
    if not settings.enabled:
        return None
    if not available():
        log.warning("warning: no C2PA content credentials: c2pa-python is not installed (%s); "
                    "the watermark and metadata are still written", INSTALL_HINT)
        return None
    unsigned = sorted({path.suffix.lower() or "extension-less" for path in outputs if mime_type(path) is None})
    if unsigned:  # c2pa-python has no WebM or Matroska: those outputs went without them, unsaid
        log.warning("warning: no C2PA content credentials in %s outputs: c2pa-python cannot write them there; "
                    "the watermark and metadata are still written; write .mp4 or .mov to have them too",
                    " and ".join(unsigned))
    given = settings.cert or settings.key or os.environ.get("LIVECAM_C2PA_CERT") or os.environ.get("LIVECAM_C2PA_KEY")
    # a given identity is checked now, before any work; the local one when an output will be signed
    signing = Signing(load_identity(settings.cert, settings.key) if given else None, input, models)
    if signing.identity is None and any(mime_type(path) is not None for path in outputs):
        signing = replace(signing, identity=signing.signer_identity())
    return signing
