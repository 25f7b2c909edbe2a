//! Tokens and a recursive-descent parser for the scope language, with columns for errors.

use toolgate_policy::did_you_mean;

use super::{ATTRIBUTES, Field, MAX_DEPTH, MAX_EXPRESSION_CHARS, Op, Scope, ScopeError, ValueKind};

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Tag(String),
    Quoted(String),
    Op(Op),
    Open,
    Close,
    Comma,
    End,
}

struct Lexed {
    token: Token,
    column: usize,
}

fn error(column: usize, message: impl Into<String>) -> ScopeError {
    ScopeError { column, message: message.into() }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '*' | '?' | '/' | ':')
}

fn lex(text: &str) -> Result<Vec<Lexed>, ScopeError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let (token, next) = match c {
            '(' => (Token::Open, i + 1),
            ')' => (Token::Close, i + 1),
            ',' => (Token::Comma, i + 1),
            '=' if chars.get(i + 1) == Some(&'=') => (Token::Op(Op::Eq), i + 2),
            '=' => (Token::Op(Op::Eq), i + 1),
            '~' => (Token::Op(Op::Glob), i + 1),
            '!' if chars.get(i + 1) == Some(&'=') => (Token::Op(Op::Ne), i + 2),
            '<' if chars.get(i + 1) == Some(&'=') => (Token::Op(Op::Le), i + 2),
            '<' => (Token::Op(Op::Lt), i + 1),
            '>' if chars.get(i + 1) == Some(&'=') => (Token::Op(Op::Ge), i + 2),
            '>' => (Token::Op(Op::Gt), i + 1),
            '"' | '\'' => {
                let mut value = String::new();
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(error(column, format!("this string has no closing {c}"))),
                        Some('\\') if matches!(chars.get(j + 1), Some('\\' | '"' | '\'')) => {
                            value.push(chars[j + 1]);
                            j += 2;
                        }
                        Some(&q) if q == c => break,
                        Some(&other) => {
                            value.push(other);
                            j += 1;
                        }
                    }
                }
                (Token::Quoted(value), j + 1)
            }
            c if is_word_char(c) => {
                let mut j = i;
                while j < chars.len() && is_word_char(chars[j]) {
                    j += 1;
                }
                let word: String = chars[i..j].iter().collect();
                match word.strip_prefix("tag:") {
                    Some("") => return Err(error(column, "`tag:` needs a key, e.g. tag:env")),
                    Some(key) => (Token::Tag(key.to_string()), j),
                    None => (Token::Word(word), j),
                }
            }
            other => {
                return Err(error(
                    column,
                    format!(
                        "unexpected `{other}`: expected an attribute, tag:KEY, a value or one of = != ~ < <= > >= ( ) ,"
                    ),
                ));
            }
        };
        out.push(Lexed { token, column });
        i = next;
    }
    out.push(Lexed { token: Token::End, column: chars.len() + 1 });
    Ok(out)
}

/// Parses an expression; the error names the column of the mistake and, for a misspelled
/// attribute, the closest one.
pub fn parse(text: &str) -> Result<Scope, ScopeError> {
    if text.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(error(
            MAX_EXPRESSION_CHARS + 1,
            format!("an expression may have at most {MAX_EXPRESSION_CHARS} characters"),
        ));
    }
    let tokens = lex(text)?;
    if tokens.len() == 1 {
        return Err(error(1, "the expression is empty: try `status = online` or `tag:env = \"prod\"`"));
    }
    let mut parser = Parser { tokens, at: 0, depth: 0 };
    let scope = parser.expression()?;
    match &parser.peek().token {
        Token::End => Ok(scope),
        Token::Close => Err(error(parser.peek().column, "this `)` closes nothing")),
        _ => Err(error(parser.peek().column, "expected `and`, `or` or the end of the expression")),
    }
}

struct Parser {
    tokens: Vec<Lexed>,
    at: usize,
    depth: usize,
}

fn keyword(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.eq_ignore_ascii_case(word))
}

impl Parser {
    fn peek(&self) -> &Lexed {
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> &Lexed {
        let at = self.at.min(self.tokens.len() - 1);
        self.at += 1;
        &self.tokens[at]
    }

    fn nest(&mut self) -> Result<(), ScopeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(error(self.peek().column, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<Scope, ScopeError> {
        let mut any = vec![self.term()?];
        while keyword(&self.peek().token, "or") {
            self.next();
            any.push(self.term()?);
        }
        Ok(if any.len() == 1 { any.remove(0) } else { Scope::Or { any } })
    }

    fn term(&mut self) -> Result<Scope, ScopeError> {
        let mut all = vec![self.factor()?];
        while keyword(&self.peek().token, "and") {
            self.next();
            all.push(self.factor()?);
        }
        Ok(if all.len() == 1 { all.remove(0) } else { Scope::And { all } })
    }

    fn factor(&mut self) -> Result<Scope, ScopeError> {
        let column = self.peek().column;
        if keyword(&self.peek().token, "not") {
            self.next();
            self.nest()?;
            let scope = self.factor()?;
            self.depth -= 1;
            return Ok(Scope::Not { scope: Box::new(scope) });
        }
        if self.peek().token == Token::Open {
            self.next();
            self.nest()?;
            let scope = self.expression()?;
            self.depth -= 1;
            let close = self.next();
            if close.token != Token::Close {
                return Err(error(close.column, format!("expected `)` to close the `(` at column {column}")));
            }
            return Ok(scope);
        }
        self.condition()
    }

    fn field(&mut self) -> Result<(Field, usize), ScopeError> {
        let Lexed { token, column } = self.next();
        let column = *column;
        match token.clone() {
            Token::Tag(key) => Ok((Field::Tag(key), column)),
            Token::Word(word) => match ATTRIBUTES.iter().find(|a| a.name.eq_ignore_ascii_case(&word)) {
                Some(a) => Ok((Field::Attribute(a.name), column)),
                None => {
                    let names = ATTRIBUTES.iter().map(|a| a.name);
                    Err(error(
                        column,
                        format!(
                            "unknown attribute `{word}`: {} (or tag:KEY for a tag; discover_scope_kinds lists them)",
                            did_you_mean(&word, names)
                        ),
                    ))
                }
            },
            Token::End => Err(error(column, "the expression ends where an attribute or tag:KEY was expected")),
            _ => Err(error(column, "expected an attribute (e.g. os.name) or tag:KEY here")),
        }
    }

    fn value(&mut self) -> Result<String, ScopeError> {
        let Lexed { token, column } = self.next();
        match token {
            Token::Quoted(v) => Ok(v.clone()),
            Token::Word(w) if !["and", "or", "not", "in", "exists"].iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                Ok(w.clone())
            }
            Token::End => Err(error(*column, "the expression ends where a value was expected")),
            _ => Err(error(*column, "expected a value here: a quoted string, a word or a number")),
        }
    }

    fn condition(&mut self) -> Result<Scope, ScopeError> {
        let (field, column) = self.field()?;
        let next = self.next();
        let (token, op_column) = (next.token.clone(), next.column);
        match token {
            Token::Word(w) if w.eq_ignore_ascii_case("exists") => Ok(Scope::Exists { field, column }),
            Token::Word(w) if w.eq_ignore_ascii_case("in") => {
                let open = self.next();
                if open.token != Token::Open {
                    return Err(error(open.column, "expected `(` after `in`, e.g. tag:env in (\"prod\", \"staging\")"));
                }
                let mut values = vec![self.value()?];
                loop {
                    let Lexed { token, column } = self.next();
                    match token {
                        Token::Comma => values.push(self.value()?),
                        Token::Close => break,
                        _ => return Err(error(*column, "expected `,` or `)` in the list of values")),
                    }
                }
                Ok(Scope::In { field, values, column })
            }
            Token::Op(op) => {
                if op.is_ordering() && field.kind() == ValueKind::Text {
                    return Err(error(
                        op_column,
                        format!("`{}` is text and cannot be ordered: use =, !=, ~ (glob) or in", field.name()),
                    ));
                }
                let value_column = self.peek().column;
                let value = self.value()?;
                if field.kind() == ValueKind::Integer && op != Op::Glob && value.parse::<i128>().is_err() {
                    return Err(error(value_column, format!("`{}` is a number; `{value}` is not", field.name())));
                }
                if op == Op::Glob {
                    crate::fleet::compare::check_glob(&value).map_err(|e| error(value_column, e))?;
                }
                Ok(Scope::Compare { field, op, value, column })
            }
            Token::End => Err(error(op_column, format!("`{}` needs a comparison, e.g. = \"value\"", field.name()))),
            _ => Err(error(op_column, "expected one of = != ~ < <= > >=, `in (...)` or `exists`")),
        }
    }
}
