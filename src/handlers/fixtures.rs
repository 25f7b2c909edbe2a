//! Handlers that exist for one conformance scenario each (tests/conformance/tools.yaml names
//! them as such); the shipped catalogue does not use them, so its build leaves them out.

use serde_json::{Value, json};
use toolgate_domain::{ClientMethod, Elicited, ToolOutput, ToolResult};

use crate::args;
use crate::services::ToolContext;

/// The conformance suite's `tools-call-with-progress`: 0, 50 and 100 of 100, about 50 ms
/// apart, when the client asked for progress (the same pauses when it did not).
pub async fn test_tool_with_progress(ctx: &ToolContext, _args: args::TestToolWithProgress) -> ToolResult {
    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        ctx.progress().report(step, Some(100.0), None);
    }
    Ok(ToolOutput::Structured(json!({"message": "Done: progress reported at 0, 50 and 100 of 100."})))
}

/// The conformance suite's `tools-call-with-logging`: three info lines about 50 ms apart
/// (sent only when the client asked for a level that admits them).
pub async fn test_tool_with_logging(ctx: &ToolContext, _args: args::TestToolWithLogging) -> ToolResult {
    let lines = ["Tool execution started", "Tool processing data", "Tool execution completed"];
    for (i, line) in lines.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        ctx.log().info(line);
    }
    Ok(ToolOutput::Structured(json!({"message": "Done: three info lines logged."})))
}

fn message(text: String) -> ToolResult {
    Ok(ToolOutput::Structured(json!({"message": text})))
}

fn sampled_text(answer: &Value) -> &str {
    answer.pointer("/content/text").and_then(Value::as_str).unwrap_or("(no text)")
}

fn elicited_summary(answer: &Elicited) -> String {
    let content = answer.content.clone().map(Value::Object).unwrap_or(Value::Null);
    format!("action={}, content={content}", answer.action.as_str())
}

fn sampling_request(prompt: &str) -> Value {
    json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100})
}

/// `tools-call-sampling`: asks the client's model to complete the prompt.
pub async fn test_sampling(ctx: &ToolContext, args: args::TestSampling) -> ToolResult {
    let answer = ctx.client().ask("completion", ClientMethod::Sampling, sampling_request(&args.prompt)).await?;
    message(format!("LLM response: {}", sampled_text(&answer)))
}

/// `tools-call-elicitation`: asks the client's user for a username and an email.
pub async fn test_elicitation(ctx: &ToolContext, args: args::TestElicitation) -> ToolResult {
    let schema = json!({"type": "object", "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }, "required": ["username", "email"]});
    let answer = ctx.client().elicit("user_info", &args.message, schema).await?;
    message(format!("User response: {}", elicited_summary(&answer)))
}

/// `elicitation-sep1034-defaults`: a form whose every primitive field has a default.
pub async fn test_elicitation_sep1034_defaults(
    ctx: &ToolContext,
    _args: args::TestElicitationSep1034Defaults,
) -> ToolResult {
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": true},
    }});
    let answer = ctx.client().elicit("profile", "Please review your profile", schema).await?;
    message(format!("Elicitation completed: {}", elicited_summary(&answer)))
}

/// `elicitation-sep1330-enums`: a form with each of the five enum shapes.
pub async fn test_elicitation_sep1330_enums(ctx: &ToolContext, _args: args::TestElicitationSep1330Enums) -> ToolResult {
    let schema = json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"},
        ]}},
    }});
    let answer = ctx.client().elicit("choices", "Please make your selections", schema).await?;
    message(format!("Elicitation completed: {}", elicited_summary(&answer)))
}

fn name_form() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
}

fn ok_form() -> Value {
    json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
}

/// `input-required-result-basic-elicitation` (2026-07-28): the user's name, under `user_name`.
pub async fn test_input_required_result_elicitation(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultElicitation,
) -> ToolResult {
    let answer = ctx.client().elicit("user_name", "What is your name?", name_form()).await?;
    let name = answer.content.as_ref().and_then(|c| c.get("name")).and_then(Value::as_str).unwrap_or("stranger");
    message(format!("Hello, {name}!"))
}

/// `input-required-result-basic-sampling`.
pub async fn test_input_required_result_sampling(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultSampling,
) -> ToolResult {
    let request = sampling_request("What is the capital of France?");
    let answer = ctx.client().ask("capital_question", ClientMethod::Sampling, request).await?;
    message(format!("The model answered: {}", sampled_text(&answer)))
}

/// `input-required-result-basic-list-roots`.
pub async fn test_input_required_result_list_roots(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultListRoots,
) -> ToolResult {
    let answer = ctx.client().ask("roots", ClientMethod::Roots, json!({})).await?;
    let count = answer.get("roots").and_then(Value::as_array).map_or(0, Vec::len);
    message(format!("The client has {count} root(s)."))
}

/// `input-required-result-request-state` and `-tampered-state`: one confirmation.
async fn confirm_ok(ctx: &ToolContext) -> ToolResult {
    let answer = ctx.client().elicit("confirm", "Proceed?", ok_form()).await?;
    let ok = answer.content.as_ref().and_then(|c| c.get("ok")).and_then(Value::as_bool) == Some(true);
    message(if ok { "state-ok".into() } else { format!("not confirmed: {}", elicited_summary(&answer)) })
}

pub async fn test_input_required_result_request_state(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultRequestState,
) -> ToolResult {
    confirm_ok(ctx).await
}

pub async fn test_input_required_result_tampered_state(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultTamperedState,
) -> ToolResult {
    confirm_ok(ctx).await
}

/// `input-required-result-multiple-input-requests`: three questions in one round (each is
/// asked before any answer is needed, so all three go out together).
pub async fn test_input_required_result_multiple_inputs(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultMultipleInputs,
) -> ToolResult {
    let client = ctx.client();
    let name = client.elicit("user_name", "What is your name?", name_form()).await;
    let capital = client.ask("capital_question", ClientMethod::Sampling, sampling_request("Capital of France?")).await;
    let roots = client.ask("roots", ClientMethod::Roots, json!({})).await;
    let (name, capital, roots) = (name?, capital?, roots?);
    message(format!(
        "{}; {}; {} root(s)",
        elicited_summary(&name),
        sampled_text(&capital),
        roots.get("roots").and_then(Value::as_array).map_or(0, Vec::len)
    ))
}

/// `input-required-result-multi-round`: a name, then a colour, in two rounds.
pub async fn test_input_required_result_multi_round(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultMultiRound,
) -> ToolResult {
    let name = ctx.client().elicit("name", "What is your name?", name_form()).await?;
    let colour_form = json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
    let colour = ctx.client().elicit("color", "What is your favourite colour?", colour_form).await?;
    message(format!("name: {}; colour: {}", elicited_summary(&name), elicited_summary(&colour)))
}

/// `input-required-result-capability-check`: asks only what the client declared it can answer.
pub async fn test_input_required_result_capabilities(
    ctx: &ToolContext,
    _args: args::TestInputRequiredResultCapabilities,
) -> ToolResult {
    let client = ctx.client();
    if client.supports(ClientMethod::Elicitation) {
        let answer = client.elicit("user_name", "What is your name?", name_form()).await?;
        return message(format!("elicited: {}", elicited_summary(&answer)));
    }
    let answer = client.ask("capital_question", ClientMethod::Sampling, sampling_request("Capital of France?")).await?;
    message(format!("sampled: {}", sampled_text(&answer)))
}

/// tasks-*: a tool that never becomes a task.
pub async fn greet(_ctx: &ToolContext, args: args::Greet) -> ToolResult {
    let text = format!("Hello, {}!", args.name);
    Ok(ToolOutput::Summarized { structured: json!({"message": text}), text })
}

/// tasks-*: sleeps `seconds` (as a task unless 0), or until the task is cancelled.
pub async fn slow_compute(ctx: &ToolContext, args: args::SlowCompute) -> ToolResult {
    if args.seconds > 0 {
        ctx.task().start().await;
    }
    let label = args.label.unwrap_or_else(|| "work".into());
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_secs(args.seconds.max(0) as u64)) => {}
        _ = ctx.cancellation().cancelled() => return message(format!("{label}: cancelled")),
    }
    message(format!("{label}: computed in {} s", args.seconds))
}

/// tasks-*: a task whose tool reports an error after about a second.
pub async fn failing_job(ctx: &ToolContext, _args: args::FailingJob) -> ToolResult {
    ctx.task().start().await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    Ok(ToolOutput::Static(r#"{"content":[{"type":"text","text":"the job failed, as this fixture always does"}],"isError":true}"#))
}

/// tasks-lifecycle: a task that ends in a protocol error (the internal error a store fault gives).
pub async fn protocol_error_job(ctx: &ToolContext, _args: args::ProtocolErrorJob) -> ToolResult {
    ctx.task().start().await;
    Err(toolgate_domain::StoreError::Unavailable("this fixture always fails inside the server".into()).into())
}

/// tasks-mrtr-input: a task that asks its user to confirm, then ends.
pub async fn confirm_delete(ctx: &ToolContext, args: args::ConfirmDelete) -> ToolResult {
    ctx.task().start().await;
    let form = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
    let answer = ctx.client().elicit("confirm", &format!("Delete {}?", args.filename), form).await?;
    message(format!("{}: {}", args.filename, elicited_summary(&answer)))
}

/// tasks-mrtr-input: a task that asks two questions at once.
pub async fn multi_input(ctx: &ToolContext, _args: args::MultiInput) -> ToolResult {
    ctx.task().start().await;
    let client = ctx.client();
    let (first, second) = tokio::join!(
        client.elicit("first", "Your name?", name_form()),
        client.elicit("second", "Your name again?", name_form())
    );
    message(format!("{}; {}", elicited_summary(&first?), elicited_summary(&second?)))
}

/// tasks-mrtr-composition: asks the user's name in an ordinary round, then becomes a task.
pub async fn test_tool_with_task(ctx: &ToolContext, _args: args::TestToolWithTask) -> ToolResult {
    let answer = ctx.client().elicit("user_name", "What is your name?", name_form()).await?;
    let name = answer.content.as_ref().and_then(|c| c.get("name")).and_then(Value::as_str).unwrap_or("stranger");
    let name = name.to_string();
    ctx.task().start().await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    message(format!("Hello, {name}, from a task"))
}
