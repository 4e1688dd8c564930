//! Blocks over several tags besides `for`, `if`, `case` and `cond`: a `fn` whose clauses'
//! bodies are template text (`<%= Enum.map(@items, fn item -> %>...<% end) %>`), `with ... do
//! %>...<% else {:error, r} -> %>...<% end %>` (read as `case`s), and `for ..., into: x do`.

use galleon_iolist::IoList;

use crate::ast::{BlockClause, Clause, Expr, ExprKind, Node, Pattern, Qualifier, Span};
use crate::lexer::{SyntaxError, Tok, Token};
use crate::value::Value;

use super::conditional::{WITH_DONE, WITH_ELSE, WITH_OTHER, WithStep, with_steps_cases};
use super::expr::Parser;
use super::pattern::{check_bindings, to_pattern};

/// The identifier standing for a `fn` block among the tokens of its call: the lexer makes no
/// identifier with a `%`.
pub(super) const FN_BLOCK: &str = "%fn";

/// The variable holding a block `for`'s collectable (`into: x`): `_` names are never bound by
/// a template's patterns, so no template variable is this one.
const INTO: &str = "_into";

/// A `fn` spanning tags, open.
pub(super) struct OpenFn {
    /// The tokens of the opening tag before `fn` (`Enum.map(@items,`).
    prefix: Vec<Token>,
    /// From `fn` to the first clause's `->`.
    pub(super) at: Span,
    clauses: Vec<BlockClause>,
    /// The head of the clause whose body is being read.
    pending: Option<(Vec<Pattern>, Option<Expr>)>,
}

impl OpenFn {
    /// The `fn` block `tokens` open when they end with `->` after a `fn` not closed in them
    /// (`Enum.map(@items, fn item ->`); `None` when they do not.
    pub(super) fn open(tokens: &[Token]) -> Option<Result<OpenFn, SyntaxError>> {
        let word = |t: &Token, w: &str| matches!(&t.tok, Tok::Ident(x) if x == w);
        let i = tokens.iter().rposition(|t| word(t, "fn"))?;
        if tokens[i..].iter().any(|t| word(t, "end")) {
            return None;
        }
        let at = tokens[i].span.to(tokens.last()?.span);
        let mut p = Parser::new(tokens[i + 1..].to_vec(), at.end);
        Some(p.fn_head(at).and_then(|head| {
            rest_is_empty(&p)?;
            Ok(OpenFn {
                prefix: tokens[..i].to_vec(),
                at,
                clauses: Vec::new(),
                pending: Some(head),
            })
        }))
    }

    /// A `<% params [when guard] -> %>` tag (`tokens`, `->` included): the next clause, after
    /// `body`, the one before's.
    pub(super) fn clause(
        &mut self,
        tokens: Vec<Token>,
        body: Vec<Node>,
        end: usize,
    ) -> Result<(), SyntaxError> {
        let first = tokens.first().map_or(self.at, |t| t.span);
        self.end_clause(body);
        let mut p = Parser::new(tokens, end);
        let (params, guard) = p.fn_head(self.at)?;
        rest_is_empty(&p)?;
        if self
            .clauses
            .first()
            .is_some_and(|c| c.params.len() != params.len())
        {
            return Err(SyntaxError::new(
                first,
                "the clauses of a `fn` must take the same number of parameters",
            ));
        }
        self.pending = Some((params, guard));
        Ok(())
    }

    fn end_clause(&mut self, body: Vec<Node>) {
        if let Some((params, guard)) = self.pending.take() {
            self.clauses.push(BlockClause {
                params,
                guard,
                body,
            });
        }
    }

    /// Closed by `<% end<suffix> %>` (`end) %>`, `end) |> Enum.join() %>`): a parser over the
    /// opening tag's tokens before `fn`, the `fn` (as [`FN_BLOCK`]) and `suffix`, to be read
    /// as one tag's expression; `end` is where the closing tag's contents end.
    pub(super) fn close(mut self, body: Vec<Node>, suffix: Vec<Token>, end: usize) -> Parser {
        self.end_clause(body);
        let mut tokens = self.prefix;
        tokens.push(Token {
            tok: Tok::Ident(FN_BLOCK.to_owned()),
            span: self.at,
            after_break: false,
        });
        tokens.extend(suffix);
        let mut p = Parser::new(tokens, end);
        p.block = Some(self.clauses);
        p
    }
}

/// An error at the first token `p` has not read, if any.
fn rest_is_empty(p: &Parser) -> Result<(), SyntaxError> {
    match p.tokens.get(p.pos) {
        Some(t) => Err(SyntaxError::new(t.span, "unexpected token after `->`")),
        None => Ok(()),
    }
}

/// A `pattern [when guard]` clause head (a `case`'s or a `with`'s `else`), `->` taken off.
pub(super) fn clause_head(
    tokens: Vec<Token>,
    end: usize,
) -> Result<(Pattern, Option<Expr>), SyntaxError> {
    let mut p = Parser::new(tokens, end);
    let pattern = to_pattern(p.expr()?)?;
    check_bindings(&pattern)?;
    let guard = p.guard()?;
    if let Some(t) = p.tokens.get(p.pos) {
        return Err(SyntaxError::new(t.span, "unexpected token before `->`"));
    }
    Ok((pattern, guard))
}

/// A `with` block, open: its clauses, then the `do` body, then (after `<% else p -> %>`,
/// whose first clause EEx wants in the `else` tag) the `else` clauses.
pub(super) struct OpenWith {
    steps: Vec<WithStep>,
    /// The `do` body, once `else` began.
    done: Option<Vec<Node>>,
    /// The `else` tag.
    else_at: Span,
    clauses: Vec<Clause>,
    pending: Option<(Pattern, Option<Expr>)>,
}

impl OpenWith {
    pub(super) fn new(steps: Vec<WithStep>) -> OpenWith {
        OpenWith {
            steps,
            done: None,
            else_at: Span::default(),
            clauses: Vec::new(),
            pending: None,
        }
    }

    /// `<% else pattern -> %>` at `tag` (`tokens` after `else`, before `->`); `body` is the
    /// `do` body.
    pub(super) fn begin_else(
        &mut self,
        tokens: Vec<Token>,
        body: Vec<Node>,
        tag: Span,
    ) -> Result<(), SyntaxError> {
        if self.done.is_some() {
            return Err(SyntaxError::new(tag, "a second `else` in one block"));
        }
        self.done = Some(body);
        self.else_at = tag;
        self.pending = Some(clause_head(tokens, tag.end)?);
        Ok(())
    }

    /// `<% pattern -> %>` at `tag` (`tokens` before `->`): the next `else` clause.
    pub(super) fn clause(
        &mut self,
        tokens: Vec<Token>,
        body: Vec<Node>,
        tag: Span,
    ) -> Result<(), SyntaxError> {
        if self.done.is_none() {
            return Err(SyntaxError::new(
                tag,
                "a `with`'s clauses follow its `else`: `<% else {:error, reason} -> %>`",
            ));
        }
        self.end_clause(body);
        self.pending = Some(clause_head(tokens, tag.end)?);
        Ok(())
    }

    fn end_clause(&mut self, body: Vec<Node>) {
        if let Some((pattern, guard)) = self.pending.take() {
            self.clauses.push(Clause {
                pattern,
                guard,
                body,
            });
        }
    }

    /// The `with` at `span` closed after `body`: `case (the clauses, as the one-tag `with` reads
    /// them, ending in {done, {the variables bound}}) do {done, {vars}} -> the do body;
    /// {else, v} -> v through the else clauses (none matching is an error), or output as is
    /// without `else` end`.
    pub(super) fn close(mut self, body: Vec<Node>, span: Span) -> Node {
        let done = match self.done.take() {
            Some(done) => {
                self.end_clause(body);
                done
            }
            None => body,
        };
        let mut bound = Vec::new();
        for step in &self.steps {
            step.pattern.bound(&mut bound);
        }
        let mut vars: Vec<(String, Span)> = Vec::new();
        for (name, at) in bound {
            if !vars.iter().any(|(n, _)| *n == name) {
                vars.push((name, at));
            }
        }
        let at = |kind: ExprKind| Expr { kind, span };
        let atom = |name: &str| Value::atom(name);
        let values = vars
            .iter()
            .map(|(n, s)| Expr {
                kind: ExprKind::Var(n.clone()),
                span: *s,
            })
            .collect();
        let inner = at(ExprKind::Tuple(vec![
            at(ExprKind::Lit(atom(WITH_DONE))),
            at(ExprKind::Tuple(values)),
        ]));
        let subject = with_steps_cases(self.steps, inner, span);
        let unmatched = Expr {
            kind: ExprKind::Var(WITH_OTHER.to_owned()),
            span: if self.clauses.is_empty() {
                span
            } else {
                self.else_at
            },
        };
        let on_else = if self.clauses.is_empty() {
            Node::Output(unmatched)
        } else {
            Node::Case {
                subject: unmatched,
                clauses: self.clauses,
            }
        };
        let var_patterns = vars
            .into_iter()
            .map(|(n, s)| Pattern::Var(Some(n), s))
            .collect();
        Node::Case {
            subject,
            clauses: vec![
                Clause {
                    pattern: Pattern::Tuple(
                        vec![
                            Pattern::Lit(atom(WITH_DONE), span),
                            Pattern::Tuple(var_patterns, span),
                        ],
                        span,
                    ),
                    guard: None,
                    body: done,
                },
                Clause {
                    pattern: Pattern::Tuple(
                        vec![
                            Pattern::Lit(atom(WITH_ELSE), span),
                            Pattern::Var(Some(WITH_OTHER.to_owned()), span),
                        ],
                        span,
                    ),
                    guard: None,
                    body: vec![on_else],
                },
            ],
        }
    }
}

/// `for qualifiers, into: x do %>body<% end`, output as Phoenix outputs `Enum.into(bodies, x)`:
/// `x` collected from nothing (`Enum.into([], x)`: an error for what is not collectable) and
/// output, then the loop, each iteration collecting its body, safe HTML, into `x` unless `x`
/// is a list (a string or a map takes no safe HTML: the error Elixir raises there).
pub(super) fn for_into(qualifiers: Vec<Qualifier>, into: Expr, mut body: Vec<Node>) -> Vec<Node> {
    let span = into.span;
    let at = |kind: ExprKind| Expr { kind, span };
    let var = || at(ExprKind::Var(INTO.to_owned()));
    let call = |name: &str, args: Vec<Expr>| {
        at(ExprKind::Call {
            name: name.to_owned(),
            name_span: span,
            args,
            kwargs: Vec::new(),
        })
    };
    let safe = at(ExprKind::Lit(Value::safe(IoList::new())));
    let collect = call("Enum.into", vec![at(ExprKind::List(vec![safe])), var()]);
    body.insert(
        0,
        Node::Exec(at(ExprKind::If {
            cond: Box::new(call("is_list", vec![var()])),
            negate: true,
            then: Box::new(collect),
            otherwise: None,
        })),
    );
    vec![
        Node::Bind {
            pattern: Pattern::Var(Some(INTO.to_owned()), span),
            value: call("Enum.into", vec![at(ExprKind::List(Vec::new())), into]),
            output: false,
        },
        Node::Output(var()),
        Node::For { qualifiers, body },
    ]
}
