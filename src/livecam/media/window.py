"""--output window: a resizable OpenCV window that also reports the keys pressed.

OpenCV's GUI must be driven from one thread (the main thread on macOS), so the live pipeline
calls write() and poll() from its output loop in the main thread only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from livecam.errors import DeviceError, InputError
from livecam.media.exit_guard import ExitGuard

log = logging.getLogger("livecam")

WINDOW_TITLE = "livecam (q quit, m mirror, e enhancer, s stats, f fullscreen, space pause, n next source)"
_KEYS = {27: "esc", 32: "space", ord("q"): "q", ord("m"): "m", ord("e"): "e", ord("s"): "s", ord("f"): "f",
         ord("n"): "n", ord("Q"): "q"}


SYSTEM_FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts")


def _point_qt_at_system_fonts() -> None:
    """opencv-python's Qt build looks for fonts in cv2/qt/fonts, which it no longer ships, and
    then prints several lines of warnings on stderr; point it at the system's fonts instead
    (before the first window, after cv2's import has set the variable)."""
    current = os.environ.get("QT_QPA_FONTDIR")
    if not current or os.path.isdir(current):
        return
    for folder in SYSTEM_FONT_DIRS:
        if os.path.isdir(folder):
            os.environ["QT_QPA_FONTDIR"] = folder
            return


# Qt's own warnings, off while livecam drives the window ("The X11 connection broke ... Did the
# X11 server die?" came before livecam's line on a lost display): what the user must know, livecam
# says in one line. -v keeps them; a user's own QT_LOGGING_RULES come after, so they still win.
QT_QUIET_RULES = "*.warning=false"


def _quiet_qt_warnings() -> None:
    """Qt reads QT_LOGGING_RULES once, when it starts: called before the first window."""
    if log.isEnabledFor(logging.DEBUG):
        return
    rules = os.environ.get("QT_LOGGING_RULES", "")
    if not rules.startswith(QT_QUIET_RULES):
        os.environ["QT_LOGGING_RULES"] = ";".join(r for r in (QT_QUIET_RULES, rules) if r)


def bundled_qt_platforms() -> frozenset[str] | None:
    """The Qt platform plugins that opencv-python's Qt build ships (xcb only, as of 4.x), or None
    for a build without bundled Qt (GTK, Cocoa, Win32), whose windows need no check here."""
    spec = importlib.util.find_spec("cv2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "qt" / "plugins" / "platforms"
    if not folder.is_dir():
        return None
    names = {f.name.split(".")[0].removeprefix("libq") for f in folder.iterdir()}
    # libqwayland-egl.so and libqwayland-generic.so both answer to QT_QPA_PLATFORM=wayland
    return frozenset(names | ({"wayland"} if any(n.startswith("wayland") for n in names) else set()))


def opencv_gui() -> str:
    """The GUI backend this OpenCV was built with (QT5, GTK3, WIN32UI, COCOA, ...; NONE for the
    headless wheels), from its build information."""
    import cv2

    build_information = getattr(cv2, "getBuildInformation", None)
    for line in (build_information() if build_information else "").splitlines():
        key, _, value = line.strip().partition(":")
        if key == "GUI":
            return value.strip() or "NONE"
    return "UNKNOWN"


NO_GUI = ("this OpenCV has no GUI (usually opencv-python-headless, which other packages pull in, has "
          "replaced opencv-python's cv2 folder); fix: pip uninstall -y opencv-python-headless && "
          "pip install --force-reinstall opencv-python")


def display_problem() -> str | None:
    """Why OpenCV cannot open a window on this display, or None (it can, or nothing to check).

    OpenCV's Qt build aborts the whole process (SIGABRT, no message of ours) when it cannot reach
    a display, so the display it will use is tried here first; a headless build cannot draw at all."""
    if opencv_gui() == "NONE":
        return NO_GUI
    if not sys.platform.startswith(("linux", "freebsd")):
        return None
    display = os.environ.get("DISPLAY")
    platforms = bundled_qt_platforms()
    if platforms is not None:
        wanted = [p.split(":")[0] for p in os.environ.get("QT_QPA_PLATFORM", "").split(";") if p] or ["xcb"]
        usable = [p for p in wanted if p in platforms]
        if not usable:
            return (f"this OpenCV build has no Qt platform plugin for QT_QPA_PLATFORM={'; '.join(wanted)} "
                    f"(it has {', '.join(sorted(platforms)) or 'none'}); unset QT_QPA_PLATFORM")
        if usable[0] != "xcb":
            return None  # wayland, offscreen, ...: the user chose it; Qt reports its own problems
        if not display:
            where = "a Wayland session without XWayland" if os.environ.get("WAYLAND_DISPLAY") else "no X display"
            return (f"this OpenCV build draws windows through X11 only, and DISPLAY is unset ({where}); "
                    f"enable XWayland or set DISPLAY")
        # xcb whatever WAYLAND_DISPLAY says: an X display it cannot reach aborts the process
        return x_display_problem(display)
    if not display or os.environ.get("WAYLAND_DISPLAY"):
        return None  # GTK builds speak Wayland; under Wayland, XWayland may start on demand
    return x_display_problem(display)


class _ScreenIterator(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("rem", ctypes.c_int), ("index", ctypes.c_int)]


def _libxcb() -> ctypes.CDLL | None:
    """libxcb with the signatures livecam calls, or None where it is not installed."""
    name = ctypes.util.find_library("xcb")
    if name is None:
        return None
    try:
        xcb = ctypes.CDLL(name)
    except OSError:
        return None
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    xcb.xcb_get_setup.restype = ctypes.c_void_p
    xcb.xcb_get_setup.argtypes = [ctypes.c_void_p]
    xcb.xcb_setup_roots_iterator.restype = _ScreenIterator
    xcb.xcb_setup_roots_iterator.argtypes = [ctypes.c_void_p]
    return xcb


def x_display_problem(display: str) -> str | None:
    """Why the X display named by DISPLAY cannot be reached, or None; tried with libxcb, which
    OpenCV's Qt build needs anyway."""
    xcb = _libxcb()
    if xcb is None:
        return None
    conn = xcb.xcb_connect(None, None)  # never NULL: an error connection when it fails
    try:
        failed = xcb.xcb_connection_has_error(conn) != 0
    finally:
        xcb.xcb_disconnect(conn)
    return f"cannot connect to the X display {display!r}; check DISPLAY (and xauth over ssh)" if failed else None


# Of the screen, the part a window may fill at first (title bar, panels and docks take the rest).
SCREEN_SHARE = 0.9


def screen_size() -> tuple[int, int] | None:
    """The screen's size in pixels: X11 through libxcb (the first screen of DISPLAY), Windows
    through user32; None where it cannot be asked (then the window keeps the stream's size)."""
    if sys.platform == "win32":
        try:
            user32 = ctypes.windll.user32  # type: ignore[attr-defined]
            return int(user32.GetSystemMetrics(0)), int(user32.GetSystemMetrics(1))
        except (AttributeError, OSError):
            return None
    xcb = _libxcb() if os.environ.get("DISPLAY") else None
    if xcb is None:
        return None
    conn = xcb.xcb_connect(None, None)
    try:
        if xcb.xcb_connection_has_error(conn) != 0:
            return None
        screen = xcb.xcb_setup_roots_iterator(xcb.xcb_get_setup(conn)).data
        if not screen:
            return None
        # xcb_screen_t: five 32-bit ids and masks, then width_in_pixels and height_in_pixels
        width = ctypes.c_uint16.from_address(screen + 20).value
        height = ctypes.c_uint16.from_address(screen + 22).value
        return (width, height) if width and height else None
    finally:
        xcb.xcb_disconnect(conn)


def fit_to_screen(width: int, height: int, screen: tuple[int, int] | None) -> tuple[int, int]:
    """The stream's own size, scaled down (never up, aspect kept) to SCREEN_SHARE of the screen."""
    if screen is None:
        return width, height
    scale = min(1.0, SCREEN_SHARE * screen[0] / width, SCREEN_SHARE * screen[1] / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


class WindowSink:
    name = "window"
    one_thread = True  # write, poll and close from one thread (OpenCV's GUI): nothing may wrap it in another

    def __init__(self, title: str = WINDOW_TITLE) -> None:
        problem = display_problem()
        if problem is not None:
            raise InputError(f"--output window: {problem}; or use "
                              f"--output none, --output FILE.mp4 or --output virtual-camera")
        self.title = title
        # Called on another thread when the X display goes away mid-run, while the thread that
        # drives the window is held inside Qt's exit(1) (media.exit_guard): the caller's cleanup.
        # The error is then raised on that thread (cli.py reports it and ends the process).
        self.on_lost: Callable[[DeviceError], None] | None = None
        self._guard: ExitGuard | None = None
        self._lost = False
        self._cv2: Any = None
        self._opened = False
        self._fullscreen = False
        self._pending: list[str] = []

    def _open(self, width: int, height: int) -> None:
        """A resizable window at the stream's size fitted to the screen (Qt's own first size is
        400x300, whatever the stream)."""
        import cv2

        _point_qt_at_system_fonts()
        _quiet_qt_warnings()
        self._cv2 = cv2
        try:
            cv2.namedWindow(self.title, cv2.WINDOW_NORMAL)
            cv2.resizeWindow(self.title, *fit_to_screen(width, height, screen_size()))
        except cv2.error as exc:
            raise DeviceError(f"could not open a window ({str(exc).strip().splitlines()[-1]}); use --output none, "
                              f"--output FILE.mp4 or --output virtual-camera") from exc
        self._opened = True
        # after the window: Qt's plugins are loaded, so their own exit handlers run after the guard's
        self._guard = ExitGuard(self._exit_called)

    def _exit_called(self) -> None:
        """Qt called exit() (on the guard's thread; the window's thread waits inside exit())."""
        display = os.environ.get("DISPLAY", "")
        if display and x_display_problem(display) is None:
            # the display still answers: not its loss, let that exit go on (Qt's reason is
            # among the warnings -v shows)
            log.warning("--output window: Qt ended the process; run again with -v to see why")
            return
        self._lost = True
        name = display or os.environ.get("WAYLAND_DISPLAY", "")
        error = DeviceError(f"--output window: the display {name!r} went away (its server stopped or the "
                            f"connection broke); run again on a working display, or use --output FILE.mp4 "
                            f"or --output none")
        if self.on_lost is not None:
            self.on_lost(error)
        raise error

    def write(self, image_bgr: np.ndarray) -> None:
        if not self._opened:
            self._open(image_bgr.shape[1], image_bgr.shape[0])
        self._cv2.imshow(self.title, image_bgr)
        self._pump()

    def _pump(self) -> None:
        code = self._cv2.waitKey(1)
        if code is not None and code >= 0:
            key = _KEYS.get(code & 0xFF)
            if key == "f":
                self._toggle_fullscreen()
            elif key is not None:
                self._pending.append(key)
        try:  # the user closed the window with its close button
            if self._cv2.getWindowProperty(self.title, self._cv2.WND_PROP_VISIBLE) < 1:
                self._pending.append("closed")
        except self._cv2.error:
            self._pending.append("closed")

    def _toggle_fullscreen(self) -> None:
        cv2 = self._cv2
        self._fullscreen = not self._fullscreen
        cv2.setWindowProperty(self.title, cv2.WND_PROP_FULLSCREEN,
                              cv2.WINDOW_FULLSCREEN if self._fullscreen else cv2.WINDOW_NORMAL)

    def poll(self) -> list[str]:
        if self._opened:
            self._pump()  # keep the window responsive while no new frame comes (pause)
        keys, self._pending = self._pending, []
        return keys

    def close(self) -> None:
        if self._opened and not self._lost:  # a lost display: Qt is inside exit(), never call it again
            try:
                self._cv2.destroyWindow(self.title)
                self._cv2.waitKey(1)
            except Exception:  # noqa: BLE001 - the window may already be gone
                pass
        self._opened = False
        if self._guard is not None:
            self._guard.close()
            self._guard = None
