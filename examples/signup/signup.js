// A signup page calling smsgw straight from the browser: text a code to the
// number, check the code the person types, and say every error in words.
// Plain JavaScript, no build step. The page carries smsgw's publishable key,
// whose [[api.keys]] entry lists this page's origin.
"use strict";

const SMSGW =
  new URLSearchParams(location.search).get("smsgw") ||
  document.querySelector('meta[name="smsgw-url"]').content;
const KEY = document.querySelector('meta[name="smsgw-key"]').content;

const $ = (id) => document.getElementById(id);
const sendForm = $("send-form"), verifyForm = $("verify-form");
const phoneInput = $("phone"), codeInput = $("code");
const errorBox = $("error"), doneBox = $("done");
const resendButton = $("resend");

let phone = ""; // as smsgw normalized it (E.164)
let countdown = null;

// call POSTs a JSON body to smsgw. It resolves to {status, body, retryAfter};
// it rejects only when smsgw cannot be reached at all.
async function call(path, body) {
  const res = await fetch(SMSGW + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...(KEY && { Authorization: `Bearer ${KEY}` }) },
    body: JSON.stringify(body),
  });
  let json = {};
  try {
    json = await res.json();
  } catch {
    // an answer that is not JSON: described by its status below
  }
  return { status: res.status, body: json, retryAfter: Number(res.headers.get("Retry-After") || 0) };
}

// wait says how long "seconds" is, as a person would.
function wait(seconds) {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? "" : "s"}`;
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 60) return `${minutes} minute${minutes === 1 ? "" : "s"}`;
  const hours = Math.ceil(minutes / 60);
  return `${hours} hour${hours === 1 ? "" : "s"}`;
}

// say turns smsgw's error envelope into a sentence for the person.
function say(answer) {
  const e = answer.body.error || {};
  const retry = e.retry_after || answer.retryAfter;
  switch (e.code) {
    case "invalid_phone":
      return "That does not look like a phone number. Write it with its country code, for example +44 7400 123456.";
    case "phone_not_allowed":
      return "We cannot text this number. Please use a mobile number (landlines, premium-rate and satellite numbers cannot receive our codes).";
    case "rate_limited":
      if (e.scope === "phone") return `We just texted this number. You can ask for a new code in ${wait(retry)}.`;
      if (e.scope === "ip") return `Too many codes were asked for from your connection. Please try again in ${wait(retry)}.`;
      return `We cannot text this number right now. Please try again in ${wait(retry)}.`;
    case "challenge_required":
      return "We need to check that you are not a robot before texting this number. Please try again later.";
    case "invalid_code":
      if (e.attempts_left === 0) return "That code is wrong, and it was the last try. Ask for a new code.";
      return `That code is wrong. You have ${e.attempts_left} ${e.attempts_left === 1 ? "try" : "tries"} left.`;
    case "no_pending_code":
      return "There is no code waiting for this number: it expired, was used, or had too many wrong tries. Ask for a new code.";
    case "provider_error":
      return "We could not send the text just now. Please try again in a moment.";
    case "unavailable":
      return "Verification is unavailable for a moment. Please try again shortly.";
    case "unauthorized":
    case "forbidden":
      return "This page is not allowed to use the verification service. Please tell us; it is our mistake.";
    case "invalid_request":
      return e.message ? `Something is missing: ${e.message}.` : "Something is missing. Please check and try again.";
    default:
      return e.message || `Something went wrong (error ${answer.status}). Please try again.`;
  }
}

function showError(text) {
  errorBox.textContent = text;
  errorBox.hidden = false;
}

function clearMessages() {
  errorBox.hidden = true;
  doneBox.hidden = true;
}

const unreachable =
  "We could not reach the verification service. Check your connection and try again.";

// failure says why a call to smsgw failed with no answer. fetch hides the
// cause of a cross-origin failure, so ask smsgw's /healthz in no-cors mode,
// which needs no permission: if that gets through, smsgw is up and refused
// this page's origin (its CORS preflight answered 403), which is a setting
// to fix, not a connection.
async function failure() {
  try {
    await fetch(SMSGW + "/healthz", { mode: "no-cors", cache: "no-store" });
  } catch {
    return unreachable;
  }
  const where = KEY
    ? `Add "${location.origin}" to origins in the [[api.keys]] entry of this page's publishable key`
    : `Add "${location.origin}" to server.cors_origins`;
  return `This page's origin (${location.origin}) is not allowed to call the verification service. ` +
    `${where} in smsgw's configuration, then restart smsgw.`;
}

// WebOTP: where the browser has it, it reads the code from the text (whose
// last line is "@<this page's host> #<code>") and fills it in, once the person
// agrees. The request is aborted when the person types or submits a code,
// asks for another text, or changes the number.
let otpRequest = null; // the AbortController of the pending request

function listenForCode() {
  stopListening();
  if (!("OTPCredential" in window)) return;
  const request = new AbortController();
  otpRequest = request;
  navigator.credentials
    .get({ otp: { transport: ["sms"] }, signal: request.signal })
    .then((otp) => {
      if (otpRequest !== request || !otp || !otp.code) return;
      otpRequest = null;
      codeInput.value = otp.code;
      verifyForm.requestSubmit();
    })
    .catch(() => {
      // aborted, refused or timed out: the person types the code
    });
}

function stopListening() {
  if (otpRequest) otpRequest.abort();
  otpRequest = null;
}

codeInput.addEventListener("input", stopListening);

// holdResend disables "Text a new code" for seconds, counting down.
function holdResend(seconds) {
  clearInterval(countdown);
  let left = seconds;
  const tick = () => {
    resendButton.disabled = left > 0;
    resendButton.textContent = left > 0 ? `Text a new code (${left} s)` : "Text a new code";
    left--;
    if (left < 0) clearInterval(countdown);
  };
  tick();
  if (seconds > 0) countdown = setInterval(tick, 1000);
}

async function sendCode(number) {
  clearMessages();
  let answer;
  try {
    answer = await call("/v1/otp/send", { phone: number });
  } catch {
    return showError(await failure());
  }
  if (answer.status === 202) {
    phone = answer.body.phone;
    $("sent-to").textContent =
      `We texted a code to ${phone}. It works for ${wait(answer.body.expires_in)}.`;
    sendForm.hidden = true;
    verifyForm.hidden = false;
    codeInput.value = "";
    codeInput.focus();
    holdResend(60);
    listenForCode();
    return;
  }
  if (answer.body.error && answer.body.error.scope === "phone" && !verifyForm.hidden) {
    holdResend(answer.retryAfter);
  }
  showError(say(answer));
}

sendForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const number = phoneInput.value.trim();
  if (!number) return showError("Please enter your mobile number.");
  $("send").disabled = true;
  await sendCode(number);
  $("send").disabled = false;
});

resendButton.addEventListener("click", () => sendCode(phone));

$("change").addEventListener("click", () => {
  stopListening();
  clearMessages();
  clearInterval(countdown);
  verifyForm.hidden = true;
  sendForm.hidden = false;
  phoneInput.focus();
});

verifyForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  stopListening();
  clearMessages();
  const code = codeInput.value.trim();
  if (!code) return showError("Please enter the code from the text.");
  $("verify").disabled = true;
  let answer;
  try {
    answer = await call("/v1/otp/verify", { phone, code });
  } catch {
    $("verify").disabled = false;
    return showError(await failure());
  }
  $("verify").disabled = false;
  if (answer.status === 200) {
    clearInterval(countdown);
    verifyForm.hidden = true;
    doneBox.textContent = `Your number ${answer.body.phone} is verified. Welcome!`;
    doneBox.hidden = false;
    return;
  }
  showError(say(answer));
  codeInput.select();
});
