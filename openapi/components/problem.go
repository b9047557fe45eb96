package components

import "github.com/txfence/txfence/shared/errs"

// ErrsProblem converts p, as a generated client parsed it, to the problem
// document type of package errs.
func (p Problem) ErrsProblem() errs.Problem {
	q := errs.Problem{
		Type:   string(p.Type),
		Title:  p.Title,
		Status: p.Status,
	}
	if p.Detail != nil {
		q.Detail = *p.Detail
	}
	if p.Instance != nil {
		q.Instance = *p.Instance
	}
	if p.RequestId != nil {
		q.RequestID = *p.RequestId
	}
	if p.Errors != nil {
		q.Errors = make([]errs.FieldError, len(*p.Errors))
		for i, f := range *p.Errors {
			q.Errors[i] = errs.FieldError{Pointer: f.Pointer, Detail: f.Detail}
		}
	}
	return q
}

// Err turns p back into the error the server raised: an *errs.Error of the
// same kind, with its message and, for an invalid request, its fields. The
// problem's own status stands in for the response's when its type is not a
// txfence kind; errs.FromBody does the same from the raw response.
func (p Problem) Err() error {
	return errs.FromProblem(p.Status, p.ErrsProblem())
}
