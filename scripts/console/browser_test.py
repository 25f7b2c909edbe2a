"""The approver's console in a real browser (Debian's chromium over WebDriver, with selenium).

Starts the real binary with a local agent, signs a reviewer in with a password and a TOTP code
computed from the secret the enrollment page shows, sees a pending approval minted by an MCP
call, approves it, and checks that the MCP recall then runs; a held change shows the plan the
person approves. Also: a wrong code, a replayed
code, a form without its CSRF token and a self-approval are each refused with a clear message.
With --screenshots DIR, saves the main pages there (docs/console.md shows them).

Usage: python browser_test.py TOOLGATE_BINARY [--screenshots DIR]
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pyotp
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.support.ui import WebDriverWait

PASSWORD = {"rita": "rita's long console password", "admin": "admin's long console password"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, extra=("--local-agent",), settings=None, port=None):
        self.binary = binary
        self.data = tempfile.mkdtemp(prefix="toolgate-console-")
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.data, "serve.log"), "w")
        if settings:
            with open(os.path.join(self.data, "toolgate.yaml"), "w") as f:
                f.write(settings)
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data, *extra],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.token = None
        for line in self.process.stdout:
            found = re.search(r"tg_[A-Za-z0-9_-]+", line)
            if found and not self.token:
                self.token = found.group(0)
            if line.startswith("toolgate: serving MCP on"):
                break
        assert self.token, "the demo token was printed"

    def cli(self, *args, stdin=None):
        out = subprocess.run([self.binary, *args, "--data-dir", self.data], input=stdin, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def mcp(self, name, arguments, token=None):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        request = urllib.request.Request(self.base + "/mcp", data=body.encode(), headers={
            "Authorization": f"Bearer {token or self.token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
        with urllib.request.urlopen(request, timeout=20) as r:
            return json.load(r)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


class Provider:
    """oidc-provider (installed by install_clients.sh) for the console's sign-in through an
    identity provider: scripts/clients/oidc_provider.mjs with a confidential console client."""

    def __init__(self, resource, console_redirect):
        clients = os.environ.get("MCP_CLIENTS_DIR", "/tmp/mcp-clients")
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.err = tempfile.NamedTemporaryFile(prefix="oidc-provider-", suffix=".log", delete=False)
        node = subprocess.run(["bash", "-c", f"source {clients}/env.sh && command -v node"],
                              capture_output=True, text=True).stdout.strip() or "node"
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "oidc_provider.mjs")
        self.process = subprocess.Popen([node, script, str(self.port), resource, console_redirect],
                                        stdout=subprocess.PIPE, stderr=self.err, text=True,
                                        env={**os.environ, "MCP_CLIENTS_DIR": clients})
        line = self.process.stdout.readline()
        assert line.startswith("issuer: "), f"the provider did not start: {line} (see {self.err.name})"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def submit(driver, button):
    """Clicks a submit button and waits for the next page to load: the old page's root is gone
    (chromium reports that as a stale element or as a node outside the document), then the
    new one is complete."""
    page = driver.find_element(By.TAG_NAME, "html")
    button.click()

    def old_page_gone(_):
        try:
            page.is_enabled()
            return False
        except WebDriverException:
            return True

    WebDriverWait(driver, 20).until(old_page_gone)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")


def error_text(driver):
    found = driver.find_elements(By.ID, "error")
    return found[0].text if found else ""


def sign_in(driver, server, name, code=""):
    driver.get(server.base + "/console/sign-in")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(PASSWORD[name])
    if code:
        driver.find_element(By.ID, "code").send_keys(code)
    submit(driver, driver.find_element(By.ID, "sign-in"))


def sign_out(driver):
    submit(driver, driver.find_element(By.XPATH, "//button[text()='Sign out']"))


def enroll(driver, name, shots):
    """On the enrollment page: a wrong code first (refused), then the right one. The TOTP and
    the code that enrolled it."""
    check(driver.current_url.endswith("/console/enroll"), f"{name} is sent to enroll a second factor")
    shots("enroll")
    totp = pyotp.TOTP(driver.find_element(By.ID, "secret").text)
    driver.find_element(By.ID, "code").send_keys("000000" if totp.now() != "000000" else "111111")
    submit(driver, driver.find_element(By.ID, "enroll"))
    check("does not match" in error_text(driver), "a wrong enrollment code is refused with a clear message")
    code = totp.now()
    driver.find_element(By.ID, "code").send_keys(code)
    submit(driver, driver.find_element(By.ID, "enroll"))
    check(driver.current_url.endswith("/console/approvals"), f"{name} enrolled and sees the approvals")
    return totp, code


def decide(driver, approval_id, reason, button="Approve"):
    row = driver.find_element(By.ID, f"approval-{approval_id}")
    row.find_element(By.NAME, "reason").send_keys(reason)
    submit(driver, row.find_element(By.XPATH, f".//button[text()='{button}']"))


def at_provider(driver, person):
    """On oidc-provider's interaction pages: its login form as `person` (any password), then
    its consent form when it shows one; until the browser is back at toolgate."""
    WebDriverWait(driver, 20).until(lambda d: "/interaction/" in d.current_url)
    for _ in range(3):
        if "/interaction/" not in driver.current_url:
            return
        logins = driver.find_elements(By.NAME, "login")
        if logins:
            logins[0].send_keys(person)
            driver.find_element(By.NAME, "password").send_keys("any password")
        submit(driver, driver.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    assert "/interaction/" not in driver.current_url, f"stuck at the provider: {driver.current_url}"


def identity_provider(driver, binary, shots):
    """The console through the organisation's identity provider: rhea (fleet-admins at the
    IdP, so Administrator here) signs in at oidc-provider, approves at once (her sign-in is
    fresh), then past the step-up window is sent back to the IdP to sign in again before
    her next decision; the audit rows say which proof each decision had."""
    port = free_port()
    secrets_dir = tempfile.mkdtemp(prefix="toolgate-idp-")
    with open(os.path.join(secrets_dir, "console-secret"), "w") as f:
        f.write("console-secret\n")
    base = f"http://127.0.0.1:{port}"
    provider = Provider(f"{base}/mcp", f"{base}/console/oidc/callback")
    settings = f"""public_url: {base}
oauth:
  issuers:
    - issuer: {provider.issuer}
      console:
        client_id: toolgate-console
        client_secret_file: {secrets_dir}/console-secret
        scopes: openid profile email groups
  group_roles:
    - {{idp_group: fleet-admins, role: Administrator}}
"""
    server = Server(binary, extra=("--console-step-up-window", "4s"), settings=settings, port=port)
    try:
        driver.get(base + "/console/sign-in")
        submit(driver, driver.find_element(By.ID, "sign-in-idp"))
        at_provider(driver, "rhea")
        WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/console/approvals"))
        check("rhea" in driver.find_element(By.TAG_NAME, "header").text,
              "rhea signed in through the identity provider and sees the approvals")
        shots("idp-approvals")
        agent = "agt-00000000000000aa"
        first = server.mcp("delete_tag", {"agent_id": agent, "key": "env"})["error"]["data"]["approval_id"]
        driver.get(base + "/console/approvals")
        decide(driver, first, "fresh from the IdP")
        check("Approved delete_tag for admin" in driver.find_element(By.ID, "notice").text,
              "her sign-in is fresh: she approves without another proof")
        second = server.mcp("delete_tag", {"agent_id": agent, "key": "other"})["error"]["data"]["approval_id"]
        time.sleep(5)
        driver.get(base + "/console/approvals")
        row = driver.find_element(By.ID, f"approval-{second}")
        check(row.find_elements(By.ID, "step-up") and not row.find_elements(By.NAME, "code"),
              "past the step-up window the form offers a new sign-in at the IdP, not a code")
        decide(driver, second, "too late")
        check("more than 4 s old" in error_text(driver), "deciding with a stale sign-in is refused with a clear message")
        driver.get(base + "/console/approvals")
        submit(driver, driver.find_element(By.ID, f"approval-{second}").find_element(By.ID, "step-up"))
        check("prompt=login" in driver.current_url or "/interaction/" in driver.current_url,
              "the step-up asks the IdP for a fresh login")
        at_provider(driver, "rhea")
        WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/console/approvals"))
        decide(driver, second, "after a fresh sign-in")
        notice = driver.find_element(By.ID, "notice").text
        check("Approved delete_tag for admin" in notice and "(fresh sign-in)" in notice,
              "after signing in again at the IdP she approves, and the console says which proof it took")
        driver.get(base + "/console/audit?action=approval.review")
        audit_text = driver.find_element(By.ID, "audit").text
        check(f"assurance: identity provider {provider.issuer} (proof within" in audit_text,
              "the first decision is audited with her IdP sign-in as its proof")
        check("(fresh sign-in)" in audit_text, "the second with the IdP's fresh sign-in")
        shots("idp-audit")
    finally:
        server.stop()
        provider.stop()


def page_server(host):
    """A page on another origin (http://HOST:PORT/, an empty HTML page): where a browser-based
    MCP client would be served from."""
    root = tempfile.mkdtemp(prefix="toolgate-page-")
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<!doctype html><title>an MCP client page</title>")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", host, "--directory", root],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    origin = f"http://{host}:{port}"
    deadline = time.time() + 10
    while True:
        try:
            urllib.request.urlopen(origin + "/index.html", timeout=2).read()
            return origin, process
        except OSError:
            assert time.time() < deadline, f"the page server on {origin} did not start"
            time.sleep(0.1)


# Run in the page: tools/list over fetch, as a browser-based MCP client sends it (a bearer
# token and the MCP headers: a preflight first), and what the page could read of the answer.
FETCH_TOOLS = """
const [url, token, done] = arguments;
const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2025-11-25"};
if (token) headers["Authorization"] = "Bearer " + token;
fetch(url, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list"})})
  .then(async r => done({status: r.status, tools: r.ok ? (await r.json()).result.tools.length : 0,
                         challenge: r.headers.get("WWW-Authenticate"), correlation: r.headers.get("X-Correlation-Id")}))
  .catch(e => done({refused: String(e)}));
"""


def cors_from_pages(driver, binary):
    """A page on a listed origin lists the tools and reads the headers an MCP client needs;
    a page on any other origin is refused by the browser itself."""
    # 127.0.0.2 is this machine too, but not an origin the server allows by itself.
    listed, listed_pages = page_server("127.0.0.2")
    other, other_pages = page_server("127.0.0.2")
    server = Server(binary, extra=("--allowed-origin", listed))
    try:
        driver.get(listed + "/index.html")
        answer = driver.execute_async_script(FETCH_TOOLS, server.base + "/mcp", server.token)
        check(answer.get("status") == 200 and answer["tools"] > 0,
              f"a page on a listed origin ({listed}) lists the tools over fetch: {answer}")
        check(bool(answer.get("correlation")), "and reads the exposed headers of the answer")
        answer = driver.execute_async_script(FETCH_TOOLS, server.base + "/mcp", None)
        check(answer.get("status") == 401 and "Bearer" in (answer.get("challenge") or ""),
              f"without a token it reads the 401's WWW-Authenticate: {answer}")
        driver.get(other + "/index.html")
        answer = driver.execute_async_script(FETCH_TOOLS, server.base + "/mcp", server.token)
        check("refused" in answer, f"a page on an origin not listed ({other}) gets nothing: {answer}")
    finally:
        server.stop()
        listed_pages.terminate()
        other_pages.terminate()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    server = Server(os.path.abspath(args.binary))
    driver = browser()

    def shots(name):
        if args.screenshots:
            os.makedirs(args.screenshots, exist_ok=True)
            driver.save_screenshot(os.path.join(args.screenshots, f"{name}.png"))

    try:
        for name in PASSWORD:
            if name != "admin":
                server.cli("principal", "add", name, "--role", "Administrator")
            server.cli("principal", "set-password", name, stdin=PASSWORD[name] + "\n")
        deadline = time.time() + 60
        while "agt-" not in server.cli("agent", "list"):
            assert time.time() < deadline, "the local agent enrolled"
            time.sleep(0.2)
        agent = re.search(r"agt-[0-9a-f]{16}", server.cli("agent", "list")).group(0)
        while server.mcp("set_tag", {"agent_id": agent, "key": "env", "value": "staging"})["result"]["isError"]:
            assert time.time() < deadline, "the local agent is online"
            time.sleep(0.2)

        # rita signs in with her password, enrolls her authenticator, and sees the ticket.
        sign_in(driver, server, "rita")
        totp, used = enroll(driver, "rita", shots)
        ticket = server.mcp("delete_tag", {"agent_id": agent, "key": "env"})
        check(ticket["error"]["code"] == -32006, "the MCP call is held for a person's approval (-32006)")
        approval_id = ticket["error"]["data"]["approval_id"]
        driver.get(server.base + "/console/approvals")
        check(driver.find_elements(By.ID, f"approval-{approval_id}"), "the pending approval is listed")
        row_text = driver.find_element(By.ID, f"approval-{approval_id}").text
        check("delete_tag" in row_text and "admin" in row_text and "approval required by" in row_text,
              "with its tool, its submitter and the policy rule behind it")
        shots("approvals")

        # A form whose CSRF token was removed is refused.
        driver.execute_script(
            f"document.querySelector('#approval-{approval_id} input[name=csrf]').remove()")
        decide(driver, approval_id, "no token")
        check("CSRF" in error_text(driver), "a form without its CSRF token is refused")
        driver.get(server.base + "/console/approvals")
        decide(driver, approval_id, "change window agreed")
        notice = driver.find_element(By.ID, "notice").text
        check(f"Approved delete_tag for admin" in notice, "rita approves it")
        recall = server.mcp("delete_tag", {"agent_id": agent, "key": "env", "approval_id": approval_id})
        check(recall["result"]["isError"] is False and recall["result"]["structuredContent"]["deleted_value"] == "staging",
              "the MCP recall then runs the tool")

        # A held change shows each host's plan: the local agent would write a marker of 5 bytes.
        supervised = re.search(r"tg_[A-Za-z0-9_-]+", server.cli(
            "token", "create", "--principal", "admin", "--tier", "supervised", "--expires-in", "1h")).group(0)
        change = {"definition": "write_marker", "params": {"name": "browser", "text": "hello"}, "agent_ids": [agent]}
        held = server.mcp("execute_instruction", change, supervised)
        check(held["error"]["code"] == -32006, "a change in the supervised tier is held for a person")
        held_id = held["error"]["data"]["approval_id"]
        deadline = time.time() + 30
        while True:
            driver.get(server.base + "/console/approvals")
            row_text = driver.find_element(By.ID, f"approval-{held_id}").text
            if "1 host with this plan" in row_text or time.time() > deadline:
                break
            time.sleep(0.3)
        check("1 host with this plan" in row_text and "size_bytes_after" in row_text and "Touches:" in row_text,
              "the page shows the plan the person approves, with what the change touches")
        shots("approval-plan")
        decide(driver, held_id, "marker wanted")
        check("Approved execute_instruction" in driver.find_element(By.ID, "notice").text, "rita approves the plan")
        recalled = server.mcp("execute_instruction", {**change, "approval_id": held_id}, supervised)
        check(recalled["result"]["isError"] is False, "the recall of the approved change runs")

        driver.get(server.base + "/console/tokens")
        shots("tokens")
        driver.get(server.base + "/console/audit?action=approval.review")
        check("assurance: password+totp" in driver.find_element(By.ID, "audit").text,
              "the decision is audited with the assurance used")
        shots("audit")
        driver.get(server.base + "/console/fleet")
        check(agent in driver.find_element(By.ID, "agents").text, "the fleet page lists the agent")
        shots("fleet")

        # Signing in again with the code that enrolled the factor is refused (it was used, and
        # a code counts once); a wrong one too; the next code works.
        sign_out(driver)
        shots("sign-in")
        sign_in(driver, server, "rita", used)
        check("used already" in error_text(driver), "a replayed code is refused with a clear message")
        sign_in(driver, server, "rita", "999999" if used != "999999" else "888888")
        check("wrong" in error_text(driver), "a wrong code is refused")
        while True:
            nxt = totp.at(time.time() + 30)
            sign_in(driver, server, "rita", nxt)
            if driver.current_url.endswith("/console/approvals"):
                break
            assert "used already" in error_text(driver), error_text(driver)
            time.sleep(1)
        check(True, "the next code signs rita in")
        sign_out(driver)

        # The submitter cannot approve their own request.
        server.mcp("set_tag", {"agent_id": agent, "key": "env", "value": "prod"})
        own = server.mcp("delete_tag", {"agent_id": agent, "key": "env"})["error"]["data"]["approval_id"]
        sign_in(driver, server, "admin")
        enroll(driver, "admin", lambda _: None)
        decide(driver, own, "my own")
        check("You submitted this request" in error_text(driver), "a self-approval is refused")
        sign_out(driver)
        identity_provider(driver, server.binary, shots)
        cors_from_pages(driver, server.binary)
        print("console browser test: all checks passed")
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
